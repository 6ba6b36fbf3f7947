"""Results: the run's outcome, computed only from the plan and the attempts that really ran.

In: plan.json and the attempts. Out: `Results` (build.py; results.json): a case's state over its repeats
(verdicts.py, with the k-of-N rule of runner.core.quorum), which attempt lines count (vetting.py), uplift's two arms
(uplift.py), the routing matrix over every attempt (routing.py), how sure the sequential verdict is (sureness.py;
the reports read its figures), shards merged (merge.py), the same cases on several hosts compared (host_comparison.py). modelfile.py reads a
written plan.json or results.json back with one line of why not.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["build", "host_comparison", "merge", "modelfile", "routing", "sureness", "uplift", "vetting"]
