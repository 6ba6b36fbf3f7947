"""Execution: the plan's sessions, under a concurrency limit, a spend cap and quorum early stop.

In: a `Plan` and a host. Out: attempts, one JSON line each in the run folder (rundir.py). executor.py runs the
sessions, as each finishes or in batched rounds; grading.py grades each attempt as it ends; budget.py holds the
spend cap; reconcile.py settles a killed run's worst cases; progress.py shows it; batch/ is the Message Batches
broker, its records and the host and judge that send through it. A whole `skill-evals run` is runner.pipeline.run.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["batch", "budget", "executor", "grading", "progress", "reconcile", "rundir"]
