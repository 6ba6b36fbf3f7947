"""skill-evals: executes the evals of an Agent Skills library against the real host, honestly."""

import gc

__version__ = "0.1.0"

# A command's start-up makes ~110,000 objects that live as long as the process (the modules and models of the runner,
# pydantic and the agent SDK) and next to no garbage. At Python's default threshold (700 allocations) the cyclic
# collector ran ~260 times over them, three of them full collections: ~0.1 s of CPU at every start of `run`
# (BENCHMARKS.md section 8). At 10,000 it runs ~18 times; the few cycles a run makes wait a little longer.
gc.set_threshold(10_000, 10, 10)
