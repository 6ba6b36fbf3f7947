"""The orchestrators: the commands that drive several stages, above all of them.

run.py is a whole `skill-evals run` (floor, selection, host, surface audit, plan, execution, results); batched.py
the same with batched rounds (`--batch`); rejudge.py judges a finished run again (`skill-evals judge`);
probe_calibration.py runs the seed-000 protocol (`skill-evals calibrate`). The stages below never import these.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["batched", "each_host", "probe_calibration", "rejudge", "run"]
