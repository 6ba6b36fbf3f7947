"""The bottom of the package: the types every stage shares, importing nothing else of the runner.

States with their named groups (states.py), case kinds and what each means to the rules (kinds.py), the hosts by
name and their traits (host_traits.py), what a session is given and what was observed in it (observation.py), an
attempt's graded outcome (outcomes.py), the k-of-N rule and what any verdict rule answers (quorum.py), the
sequential verdict (sequential.py) and the one base of usage errors (errors.py).
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["errors", "host_traits", "kinds", "observation", "outcomes", "quorum", "sequential", "states"]
