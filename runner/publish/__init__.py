"""Stage 7, publishing: one results.json to a forge.

In: results.json and the rendered Markdown. Out: GitHub's check run with annotations, one PR comment and
the job summary (github.py).
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["github", "suggestion"]
