"""The independent judge for prose assertions (semantics §6), used while attempts are graded.

In: a transcript's answer and an assertion. Out: a judged verdict with its reason (prose.py). agreement.py checks
the judge against labelled answers before a run relies on it. Re-judging a finished run is runner.pipeline.rejudge;
tier-2 probe calibration is runner.probes.calibration, a different protocol.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["agreement", "prose"]
