"""Stage 2, the floor: what must hold before anything is planned or spent.

In: a `Library`. Out: findings and the floor's decision (gate.py: which skills or cases the findings keep
from running), the census (census.py: what the corpus contains), and the surface audit (surface.py, with
listing.py's estimate: what the model is really shown of the library). `skill-evals validate` is validate.py.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["census", "gate", "validate"]
