"""Stage 3, the plan: what a run will do and what it may cost, written before anything is spent.

In: a `Library`, the floor's decision, settings and prices. Out: a `Plan` (build.py; plan.json), with the
selection of cases and why each was chosen (select.py), cases set aside (quarantine.py), and token prices
(prices.py) for the worst-case and expected cost.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["build", "cost", "plan", "quarantine", "select"]
