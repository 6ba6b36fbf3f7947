"""Stage 4, execution: the plan's sessions, under a concurrency limit, a spend cap and quorum early stop.

In: a `Plan` and a host. Out: attempts (one JSON line each in the run folder, rundir.py). executor.py runs the
sessions, as each finishes or in batched rounds; hosts/ turns one session into an observed transcript; budget.py
holds the spend cap, ratelimit.py the adaptive concurrency, batch/ the Message Batches broker, its records and the
host and judge that send through it. run.py drives a whole `skill-evals run`
through every stage (floor, plan, execution, results) and is the one module here that looks past execution.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["batch", "budget", "executor", "grading", "progress", "reconcile", "rundir"]
