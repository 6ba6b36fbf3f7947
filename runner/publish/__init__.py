"""Publishing: one results.json to a forge.

rules.py decides what every forge posts (the conclusion, the title, the rollup fitted to the forge's byte limit,
the comment with its marker), importing no forge's SDK; forges.py is the `Forge` protocol and the forges by name,
which `publish --forge` offers; github.py is GitHub's check run, annotations, PR comment and job summary;
lanes.py the jobs that published to one commit's check run (one per commit, the worst conclusion of theirs);
suggestion.py the description suggestion of `improve` on a pull request.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["forges", "rules"]
