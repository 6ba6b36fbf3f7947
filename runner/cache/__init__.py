"""The result cache: nothing measured twice that did not change.

In: a plan's runnable cases and the context every session shares. Out: the cases whose attempts an earlier run
recorded under the same key (keys.py), their records put in this run's folder as reused (reuse.py), and, after the
run, the entries it adds to the cache folder (folder.py). Surface audits are kept there too, keyed on what decides
them.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["folder", "keys", "reuse"]
