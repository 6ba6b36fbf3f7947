"""(placeholder)"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["errors", "host_traits", "kinds", "observation", "outcomes", "quorum", "states"]
