"""`skill-evals improve SKILL`: a description improvement loop that cannot overfit.

In: a loaded `Library`, its `Settings`, one skill's name, the credentials and the loop's bounds. Out: an `Improve`
(model.py), written as improve.json, with a unified diff of SKILL.md when a candidate was chosen. The library is never
modified: each candidate runs in a temporary copy through runner.pipeline.run. split.py chooses the train and
held-out cases by kind; propose.py asks for candidates; loop.py evaluates them, with the neighbour check, and scores
the chosen one once on the held-out split; render.py is what a person reads; skillmd.py the one SKILL.md edit.

Design notes: docs/design/improve-loop.md.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["loop", "model", "propose", "render", "skillmd"]
