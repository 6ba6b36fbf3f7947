"""Stage 7, publishing: one results.json to a forge.

In: results.json and the rendered Markdown. Out: what one forge writes: on GitHub the check run with annotations,
one PR comment and the job summary (github.py). The forge-neutral rules (conclusion, title, the fitted rollup, the
comment) are rules.py; the forges by name and what publishing needs from one, forges.py.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["forges", "rules"]
