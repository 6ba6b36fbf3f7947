"""Stage 2, the floor: what must hold before anything is planned or spent.

In: a `Library`. Out: findings and the floor's decision (gate.py: which skills or cases the findings keep
from running), the census (census.py: what the corpus contains), and the surface audit (surface.py, with
listing.py's estimate: what the model is really shown of the library). `skill-evals validate` is validate.py.
"""
