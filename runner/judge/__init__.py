"""The independent judge for prose assertions (semantics §6), used while attempts are graded.

In: a transcript's answer and an assertion. Out: a judged verdict with its reason (prose.py). calibration.py
checks the judge against labelled transcripts before a run relies on it; rejudge.py judges a finished run
again from what it recorded. (Tier-2 probe calibration is runner.probes.calibration, a different protocol.)
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["agreement", "prose"]
