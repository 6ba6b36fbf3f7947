"""Tier-2 probes (seed 000): a control and a treatment arm of one session, graded on what the agent DID.

In: a probe case and a host. Out: arm observations and a probe verdict (arms.py). calibration.py is the protocol
and record of `skill-evals calibrate` (not the judge's calibration, runner.judge.agreement); running it is
runner.pipeline.probe_calibration.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["arms", "calibration"]
