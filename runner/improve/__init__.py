"""`skill-evals improve SKILL`: a description improvement loop that cannot overfit.

split.py chooses the train and held-out cases by kind; propose.py asks for candidate descriptions; loop.py
evaluates each candidate as an ordinary run of a temporary library copy, with the neighbour check, and scores the
chosen one once on the held-out split; model.py is improve.json, render.py what a person reads of it, skillmd.py the
one edit it makes to a SKILL.md.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["loop", "model", "propose", "render", "skillmd"]
