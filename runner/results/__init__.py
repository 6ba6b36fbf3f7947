"""Stage 5, results: the run's outcome, computed only from the plan and the attempts that really ran.

In: plan.json and the attempts. Out: `Results` (build.py; results.json): verdicts per attempt and per case
(verdicts.py, with quorum.py's k-of-N rule), shards merged (merge.py), history across runs (history.py).
modelfile.py reads a written plan.json or results.json back with one line of why not.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["build", "merge", "modelfile", "uplift", "vetting"]
