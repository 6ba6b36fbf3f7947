"""The floor: what must hold before anything is planned or spent.

In: a `Library`. Out: findings and the floor's decision (gate.py: which skills or cases the findings keep from
running) and the census (census.py: what the corpus contains). `skill-evals validate` is validate.py. The surface
audit itself is the host's (runner.hosts.surface).
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["census", "gate", "validate"]
