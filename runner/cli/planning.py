"""`select` and `plan`: which cases a run would run, and what it would cost, before anything is spent."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console

from runner.cli import context, options
from runner.cli.app import EXIT_OK, fail_usage
from runner.cli.environment import PLAN_ENVIRONMENT
from runner.cli.printing import print_cache, print_plan, print_selection_note


@click.command("select", short_help="Which cases a tier selects, and why each one.")
@options.library_option
@options.config_option
@options.settings_commit_option
@options.tier_option("pr: skills changed in base...head and their neighbours; cadence: this period's rotating "
                     "stratified sample; full: every case.")
@options.base_option("--tier pr: the pull request's base ref (required for pr).")
@options.head_option
@options.period_option("--tier cadence: the period key (default [select] period, else this ISO week, e.g. "
                       "2026-W48).")
@options.skill_option("Narrow to the cases of this skill (repeatable).")
@options.case_option("Narrow to cases whose uid matches this glob (repeatable).")
@options.neighbours_option("With --skill: the narrowing keeps the skills' neighbours too.")
@options.previous_option
@click.option("--routing", is_flag=True, help="Only the routing cases (what `skill-evals route` selects).")
@options.format_option(["json", "text"], "json = the selection file `run --selection` reads; text = one line per "
                                         "case with its reason.", default="json")
def select_command(library_path: Path, config: Path | None, tier: str, base: str | None, head: str | None,
                   period: str | None, skills: tuple[str, ...], cases: tuple[str, ...], neighbours: bool,
                   fmt: str, settings_commit: str | None = None, previous: Path | None = None,
                   routing: bool = False) -> None:
    """Which cases a tier selects, and why each one (also what `run`/`plan --tier` use)."""
    loaded = context.load(library_path, config, settings_commit)
    context.refuse_no_skills(loaded, library_path)
    context.refuse_unknown_selection(loaded.library, skills, cases)
    selection = context.select(loaded.library, loaded.settings, tier, base=base, head=head, period=period,
                               skills=skills, cases=cases, neighbours=neighbours, previous=previous,
                               routing=routing)
    if fmt == "json":
        click.echo(selection.model_dump_json(indent=2))
    else:
        click.echo(f"tier {selection.tier}: {len(selection.cases)} case(s); {selection.note}")
        for case in selection.cases:
            click.echo(f"  {case.uid} — {case.why}")
    sys.exit(EXIT_OK)


@click.command(short_help="The cost arithmetic of a run, before anything is spent.", epilog=PLAN_ENVIRONMENT)
@options.library_option
@options.config_option
@options.settings_commit_option
@options.run_options
@options.routing_option
@options.floor_options
@options.untrusted_option
@options.out_folder_option("Write plan.json here.")
@click.option("--no-surface", is_flag=True,
              help="Skip the surface audit: the first request is then estimated from the census's listing and the "
                   "host's measured prompt size, and the plan says so.")
@options.format_option(["text", "json"], "text = the plan for a person; json = plan.json as `run` would write it.")
def plan(library_path: Path, config: Path | None, out: Path | None, no_surface: bool, fmt: str,
         no_library_validator: bool = False, strict: bool = False, validator_sandbox: str = "none",
         untrusted_settings: bool = False, settings_commit: str | None = None, **run_options: object) -> None:
    """The cost arithmetic of a run, before anything is spent: exactly the cases `run` would run."""
    from runner.cli import comparing
    from runner.execute.rundir import RunDir
    from runner.pipeline import each_host as hosts_pipeline
    from runner.pipeline import run as runs_mod

    if run_options.get("routing"):
        context.routing_sweep(run_options)  # exactly what `route` would run, on its host
    loaded = context.load(library_path, config, settings_commit)
    context.refuse_no_skills(loaded, library_path)
    if untrusted_settings:  # the cap as `run` would have it: --max-usd (or the default), lowered by the settings
        given = run_options.get("max_usd")
        run_options["max_usd"] = context.untrusted_cap(loaded, given if isinstance(given, float) else None)
    given = run_options.get("host")
    names = hosts_pipeline.several(given if isinstance(given, str) else None)
    if len(names) > 1:  # each host's plan, and the hosts together against the one cap
        comparing.refuse_alone(run_options)
        several = [context.run_options(loaded.settings, loaded, **{**run_options, "host": name}) for name in names]
        for one in several:
            one.cache_read_only = True
        gate = context.floor_gate(loaded, run_library_validator=not no_library_validator, strict=strict,
                                  validator_sandbox=validator_sandbox)
        context.stop_on_floor(gate, "nothing would run", fmt)
        comparing.plan_hosts(loaded, several, gate, out, not no_surface, fmt)
    chosen = context.run_options(loaded.settings, loaded, **run_options)
    chosen.cache_read_only = True  # a plan reads the result cache (what `run` would take from it), never writes it
    gate = context.floor_gate(loaded, run_library_validator=not no_library_validator, strict=strict,
                              validator_sandbox=validator_sandbox)
    context.stop_on_floor(gate, "nothing would run", fmt)
    try:
        prepared = runs_mod.prepare(loaded.library, loaded.settings, chosen, context.credentials(),
                                    audit=not no_surface, floor=gate)
    except ValueError as exc:  # the stages' own kinds (a quarantine file, a selection) are UsageErrors
        fail_usage(str(exc))
    if out:
        runs_mod.write_plan(RunDir(out), prepared)
    if fmt == "json":
        click.echo(prepared.plan.model_dump_json(indent=2))
    else:
        console = Console(soft_wrap=True, highlight=False)
        print_selection_note(prepared, console)
        print_plan(prepared.plan, console)
        print_cache(prepared.cache, prepared.plan, console)
    sys.exit(EXIT_OK)
