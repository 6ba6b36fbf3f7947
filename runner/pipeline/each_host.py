"""`run --host a,b,...`: the same selected cases on each host, one after another, each into its own run folder
(`<out>/hosts/<host>/`, a normal run folder: resume and report work on it alone), under one cap for the whole run,
then the comparison (runner.results.host_comparison) in `<out>/results.json`.

Every host is planned before any session starts (a host that cannot be made, or a plan that is refused, stops the
run before anything is spent). Each later host's cap is the run's cap minus what the hosts before it spent, so a
host whose cases no longer fit has them cut as any run's are (UNRUN budget-cap), never silently left out.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from pathlib import Path

from runner.execute.executor import STOP_CANCELLED
from runner.execute.rundir import RESULTS, RunDir
from runner.pipeline import run as runs_mod
from runner.results import host_comparison as hosts_mod
from runner.results import modelfile
from runner.results.build import Results


def several(text: str | None) -> list[str]:
    """The host names of `--host a,b,...` in order; [] when none was given."""
    return [name.strip() for name in (text or "").split(",") if name.strip()]


def rebased(prepared: runs_mod.Prepared, cap_usd: float) -> runs_mod.Prepared:
    """The host's plan with the cap it runs under (what the hosts before it left), hashed again: no record of it is
    written yet, so every record of its folder carries the hash of the plan its plan.json says."""
    plan = prepared.plan.model_copy(update={"cap_usd": round(max(0.0, cap_usd), 6)})
    return dataclasses.replace(prepared, plan=plan, plan_hash=plan.digest())


def close(prepared: runs_mod.Prepared) -> None:
    """What a host (and the judge) keeps open, closed when its run never starts."""
    async def main() -> None:
        if prepared.judge is not None:
            await prepared.judge.aclose()
        await prepared.host.aclose()
    asyncio.run(main())


def not_started(prepared: runs_mod.Prepared, rundir: RunDir, why: str = STOP_CANCELLED) -> Results:
    """A host the run stopped before (an earlier host was cancelled): its plan and a results.json whose cases are
    UNRUN for `why`, so its folder is a run `run --resume` continues like any other."""
    runs_mod.write_plan(rundir, prepared)
    close(prepared)
    return runs_mod.finish(prepared, rundir, why)


def read_host(out: Path, name: str) -> Results:
    """A host's own results.json (the comparison reads nothing else of its run)."""
    return modelfile.read(hosts_mod.host_folder(out, name) / RESULTS, Results, "a results file of this runner")


def write_comparison(out: Path, names: Sequence[str], cap_usd: float) -> Results:
    """`<out>/results.json`: the first host's results with the comparison of every host's, each read from its
    folder's results.json."""
    combined = hosts_mod.combined([(name, read_host(out, name)) for name in names], cap_usd)
    RunDir(out).write_json(RESULTS, combined.model_dump_json(indent=2))
    return combined
