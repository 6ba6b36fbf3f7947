"""The plan: what a run will do and what it may cost, written before anything is spent.

In: a `Library`, the floor's decision, settings and prices. Out: a `Plan` (plan.py; plan.json), made by planner.py,
its estimate from the cost model (cost.py), with the selection of cases and why each was chosen (select.py; an
earlier run's routing confusions it follows: confusions.py), cases set aside (quarantine.py) and what a routing
sweep measures of a case (sweep.py).
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["confusions", "cost", "plan", "planner", "quarantine", "select", "sweep"]
