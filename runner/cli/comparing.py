"""`run --host a,b,...` and `plan --host a,b,...`: the same cases on several hosts, one after another, under one cap
(runner.pipeline.each_host), each host's plan and results printed, then the comparison."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click
from rich.console import Console
from rich.markup import escape

from runner.cli.app import EXIT_INTERRUPTED, EXIT_OK, fail_usage
from runner.cli.printing import print_cache, print_plan, print_results, print_selection_note, sessions_left

if TYPE_CHECKING:
    from runner.cli.context import Loaded
    from runner.execute.rundir import RunDir
    from runner.floor.gate import FloorGate
    from runner.pipeline import run as runs_mod
    from runner.plan.plan import Plan

ALONE = {"shard": "--shard", "batch": "--batch"}  # options a run on several hosts does not take


def refuse_alone(run_options: dict[str, object]) -> None:
    """Options that split or batch one host's run: with several hosts, a usage error that says what to do instead."""
    given = [flag for name, flag in ALONE.items() if run_options.get(name)]
    if given:
        fail_usage(f"{', '.join(given)} runs one host's plan: with several hosts (--host a,b,...) give each host its "
                   "own run (e.g. a matrix of hosts in CI, docs/hosts-comparison.md)")


def worst_usd(plan: Plan) -> float:
    """The plan's worst case, as `print_plan` says it: every session left at its reserved worst case."""
    e = plan.estimate
    return e.worst_usd if not e.cached_cases else e.worst_session_usd * sessions_left(plan)[1]


def print_host_plans(names: Sequence[str], prepared: Sequence[runs_mod.Prepared], cap_usd: float,
                     console: Console) -> None:
    """Each host's plan under a heading, then the hosts together against the one cap."""
    print_selection_note(prepared[0], console)
    for index, (name, one) in enumerate(zip(names, prepared, strict=True)):
        later = "" if index == 0 else f"; its cap is what the hosts before it leave of ${cap_usd:.2f}"
        console.print(f"[bold]Host {index + 1} of {len(names)}: {name}[/bold]{later}")
        print_plan(one.plan, console)
        print_cache(one.cache, one.plan, console)
    worst = [worst_usd(one.plan) for one in prepared]
    expected = [one.plan.estimate.expected_usd for one in prepared]
    each = ", ".join(f"{name} ${w:.2f} worst, ${x:.2f} expected" for name, w, x in zip(names, worst, expected,
                                                                                       strict=True))
    console.print("[bold]Hosts[/bold]: " + escape(
        f"{len(names)}, one after another, each into its own run folder (<out>/hosts/<host>/); {each}; together "
        f"${sum(worst):.2f} worst, ${sum(expected):.2f} expected, against the cap of ${cap_usd:.2f} for the whole "
        "run: each later host gets the cap minus what the hosts before it spent"))
    if sum(expected) > cap_usd:
        console.print(f"[yellow]Together the hosts are expected to cost more than the cap (${sum(expected):.2f} > "
                      f"${cap_usd:.2f}): the later hosts' cases that no longer fit will be UNRUN (budget-cap). "
                      "Narrow the selection, name fewer hosts or raise --max-usd.[/yellow]")


def prepare_hosts(loaded: Loaded, chosen: Sequence[runs_mod.Options], gate: FloorGate,
                  credentials: runs_mod.Credentials, out: Path | None, audit: bool = True
                  ) -> tuple[list[runs_mod.Prepared], list[RunDir] | None]:
    """Every host planned (and, with `out`, its folder claimed) before anything starts; a usage error when one
    cannot be."""
    from runner.execute.rundir import RunDir
    from runner.pipeline import run as runs_mod
    from runner.results.host_comparison import host_folder

    rundirs = [RunDir(host_folder(out, str(options.host))) for options in chosen] if out is not None else None
    try:
        prepared = [runs_mod.prepare(loaded.library, loaded.settings, options, credentials, audit=audit, floor=gate,
                                     rundir=rundirs[index] if rundirs is not None else None)
                    for index, options in enumerate(chosen)]
    except ValueError as exc:  # the stages' own kinds (a quarantine file, a selection) are UsageErrors
        fail_usage(str(exc))
    return prepared, rundirs


def run_hosts(loaded: Loaded, chosen: Sequence[runs_mod.Options], gate: FloorGate,
              credentials: runs_mod.Credentials, out: Path | None, console: Console) -> NoReturn:
    """The body of `run --host a,b,...` after the floor: plan every host, run each under what the ones before it
    left of the cap, write the comparison, print it; exit as a run on one host does (130 when cancelled)."""
    from runner.execute.progress import reporter
    from runner.pipeline import each_host as hosts_pipeline
    from runner.pipeline import run as runs_mod
    from runner.report.terminal import hosts_section
    from runner.results.host_comparison import spent

    names = [str(options.host) for options in chosen]
    out = out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    prepared, rundirs = prepare_hosts(loaded, chosen, gate, credentials, out)
    assert rundirs is not None
    cap = prepared[0].plan.cap_usd
    for one in prepared:
        if one.plan.unrun_all == "no-credentials":
            console.print(f"{one.plan.host}: " + runs_mod.for_key_of(runs_mod.HOW_TO_GET_RESULTS, one.plan.host),
                          markup=False)
    print_host_plans(names, prepared, cap, console)
    left, stopped = cap, None
    for index, (name, one, rundir) in enumerate(zip(names, prepared, rundirs, strict=True)):
        if stopped is not None:
            console.print(f"Host {name}: not started ({stopped}); `skill-evals run --resume {rundir.path}` runs it",
                          markup=False)
            hosts_pipeline.not_started(one, rundir, stopped)
            continue
        one = hosts_pipeline.rebased(one, left)
        runs_mod.write_plan(rundir, one)
        console.print(f"[bold]Host {index + 1} of {len(names)}: {name}[/bold]; "
                      + (f"cap ${cap:.2f}" if index == 0 else f"cap ${one.plan.cap_usd:.4f} (the run's ${cap:.2f} "
                                                              f"minus ${cap - left:.4f} the hosts before it spent)"))
        with reporter(sessions_left(one.plan)[1], one.plan.cap_usd, runs_mod.is_terminal()) as progress:
            results = runs_mod.execute(one, rundir, progress)
        print_results(results, rundir.path, console)
        left = max(0.0, left - spent(results))
        if results.stop_reason == "cancelled":
            stopped = "cancelled"
    combined = hosts_pipeline.write_comparison(out, names, cap)
    hosts_section(combined, console)
    console.print(f"Comparison: {out / 'results.json'} (the first host's results and `hosts`); read it: "
                  f"`skill-evals report {out}`", markup=False)
    sys.exit(EXIT_INTERRUPTED if stopped is not None else EXIT_OK)


def plan_hosts(loaded: Loaded, chosen: Sequence[runs_mod.Options], gate: FloorGate, out: Path | None, audit: bool,
               fmt: str) -> NoReturn:
    """The body of `plan --host a,b,...`: each host's plan (JSON: {"hosts": {name: plan}}; --out: each plan.json in
    <out>/hosts/<host>/), and the hosts together against the cap."""
    import json

    from runner.cli import context
    from runner.execute.rundir import RunDir
    from runner.pipeline import run as runs_mod
    from runner.results.host_comparison import host_folder

    names = [str(options.host) for options in chosen]
    prepared, _ = prepare_hosts(loaded, chosen, gate, context.credentials(), None, audit=audit)
    if out is not None:
        for name, one in zip(names, prepared, strict=True):
            runs_mod.write_plan(RunDir(host_folder(out, name)), one)
    if fmt == "json":
        plans = {name: json.loads(one.plan.model_dump_json()) for name, one in zip(names, prepared, strict=True)}
        click.echo(json.dumps({"hosts": plans}, indent=2))
    else:
        print_host_plans(names, prepared, prepared[0].plan.cap_usd, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_OK)


def is_comparison(folder: Path) -> bool:
    """A folder `run --host a,b,...` wrote: hosts/ and the comparison's results.json, no plan of its own."""
    from runner.results.host_comparison import HOSTS_FOLDER

    return (folder / HOSTS_FOLDER).is_dir() and not (folder / "plan.json").exists()


def resume_hosts(loaded: Loaded, out: Path, credentials: runs_mod.Credentials, max_usd: float | None,
                 console: Console) -> NoReturn:
    """`run --resume OUT` on a comparison: each host's folder resumed in order under what the others have spent of
    the run's cap (--max-usd, else the cap the comparison recorded), then the comparison written again."""
    from runner.cli.folders import read_results
    from runner.execute.progress import reporter
    from runner.execute.rundir import RunDir
    from runner.pipeline import each_host
    from runner.pipeline import run as runs_mod
    from runner.report.terminal import hosts_section
    from runner.results.host_comparison import host_folder, spent

    recorded = read_results(out).hosts
    if recorded is None:
        fail_usage(f"{out}: no plan.json and no comparison of hosts in its results.json: nothing to resume")
    names = [run.name for run in recorded.hosts]
    cap = max_usd if max_usd is not None else recorded.cap_usd
    stopped = None
    for index, name in enumerate(names):
        rundir = RunDir(host_folder(out, name))
        if stopped is not None:
            console.print(f"Host {name}: not resumed ({stopped})", markup=False)
            continue
        others = sum(spent(each_host.read_host(out, other)) for other in names if other != name
                     if (host_folder(out, other) / "results.json").exists())
        try:
            one = runs_mod.prepare_resume(rundir, loaded.library, loaded.settings, credentials,
                                          max_usd=round(max(0.0, cap - others), 6))
        except ValueError as exc:
            fail_usage(str(exc))
        console.print(f"[bold]Host {index + 1} of {len(names)}: {name}[/bold]; cap ${one.plan.cap_usd:.2f} for its "
                      f"folder (the run's ${cap:.2f} minus ${others:.4f} the other hosts spent)")
        with reporter(sessions_left(one.plan)[1], one.plan.cap_usd, runs_mod.is_terminal()) as progress:
            results = runs_mod.execute(one, rundir, progress)
        print_results(results, rundir.path, console)
        if results.stop_reason == "cancelled":
            stopped = "cancelled"
    combined = each_host.write_comparison(out, names, cap)
    hosts_section(combined, console)
    sys.exit(EXIT_INTERRUPTED if stopped is not None else EXIT_OK)
