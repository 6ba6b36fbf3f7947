"""`calibrate-judge` and `calibrate`: measure the judge on labelled answers, and tier-2 probes by the seed-000
protocol. What they compute is runner.judge.agreement's and runner.probes.calibration's; here they are parsed,
started and printed."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from runner.cli import context, options
from runner.cli.app import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE, fail_usage
from runner.cli.environment import CALIBRATE_ENVIRONMENT, JUDGE_ENVIRONMENT

if TYPE_CHECKING:
    from runner.judge.agreement import CalibrationRecord, Rates
from runner.corpus import findings as findings_mod


def rate(value: float | None) -> str:
    """A rate as a percentage; none (no item to measure it on, e.g. no FAIL label for the false PASS rate) says so."""
    return "n/a (no item to measure it on)" if value is None else f"{value:.1%}"


def rates(measured: Rates | CalibrationRecord) -> str:
    return (f"agreement {rate(measured.agreement)}, false PASS {rate(measured.false_pass_rate)}, false FAIL "
            f"{rate(measured.false_fail_rate)}, JUDGE-ERROR {rate(measured.judge_error_rate)}")


@click.command("calibrate-judge", short_help="Measure the judge on labelled answers against thresholds.",
               epilog=JUDGE_ENVIRONMENT)
@click.argument("labels", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@options.library_option
@options.config_option
@options.judge_model_option
@click.option("--no-record", is_flag=True, help="Do not append the record to .skill-evals/judge-calibration.json.")
def calibrate_judge(labels: Path, library_path: Path, config: Path | None, judge_model: str | None,
                    no_record: bool) -> None:
    """Run the judge on labelled answers: agreement, false PASS, false FAIL, JUDGE-ERROR against thresholds."""
    from runner.hosts import prices as prices_mod
    from runner.judge import agreement
    from runner.pipeline import run as runs_mod

    at = context.load_settings(library_path, config)  # no library is read: the labels are the corpus here
    if findings_mod.has_errors(at.findings):
        click.echo(findings_mod.render_text(at.findings))
        sys.exit(EXIT_USAGE)
    settings = context.with_judge_model(at.settings, judge_model)
    items = agreement.load_labels(labels)
    credentials = context.credentials()
    if not credentials.api_key:
        fail_usage("calibration needs ANTHROPIC_API_KEY; nothing was judged")
    settings = agreement.calibrating_settings(settings)
    the_judge, unavailable = runs_mod.make_judge(settings, credentials, prices_mod.load(settings), at.root)
    if the_judge is None:
        fail_usage(f"the judge is not available ({unavailable})")
    record = agreement.calibrate(the_judge, items, str(labels), settings.judge.calibration)
    console = Console(soft_wrap=True, highlight=False)
    console.print(f"Judge {record.model} (prompt {record.prompt_version}) on {record.items} labelled item(s): "
                  f"{rates(record)}; cost ${record.cost_usd:.4f}")
    for name, by in record.by_class.items():  # the thresholds gate the whole; a class is shown, not gated
        console.print(f"  class {name}: {by.items} item(s), {rates(by)}")
    console.print("PASSED the thresholds" if record.passed else "FAILED: " + "; ".join(record.failures))
    if not no_record:
        console.print(f"Recorded in {agreement.append_record(at.root, record)}")
    sys.exit(EXIT_OK if record.passed else EXIT_FINDINGS)


@click.command(short_help="Calibrate tier-2 probes by the seed-000 protocol.", epilog=CALIBRATE_ENVIRONMENT)
@click.argument("probes", nargs=-1)
@options.library_option
@options.config_option
@click.option("--all", "all_probes", is_flag=True, help="Every probe of the library.")
@click.option("--status", "status_only", is_flag=True, help="Show each probe's calibration state; start nothing.")
@options.host_option("Where the arms' sessions run: claude-code or api (the approximation). Default [run] host.")
@options.model_option("The model of the arms' sessions (default [run] model).")
@options.judge_model_option
@click.option("--explicit/--routed", "explicit", default=None,
              help="Treatment prompt starts with /<skill> (the discipline apart from routing), or the skill must be "
                   "chosen by the agent. Default: [probes] explicit_invocation.")
@options.max_usd_option("Hard cap on this command's spend.")
@options.concurrency_option("Sessions at once, at most (default [run] concurrency, 4).")
@options.format_option(["text", "json"], "text = a table per probe; json = the calibration records (or statuses "
                                         "with --status).")
@options.sandbox_option
def calibrate(probes: tuple[str, ...], library_path: Path, config: Path | None, all_probes: bool, status_only: bool,
              host: str | None, model: str | None, judge_model: str | None, explicit: bool | None,
              max_usd: float | None, concurrency: int | None, fmt: str, validator_sandbox: str = "none") -> None:
    """Calibrate tier-2 probes by the seed-000 protocol (control 2 reps, then treatment 2 reps) and record
    the verdict in calibration.json beside each probe: ceiling, window, floor or inconclusive."""
    from runner.hosts import prices as prices_mod
    from runner.pipeline import probe_calibration as calibration_run
    from runner.pipeline import run as runs_mod
    from runner.probes import calibration as pc
    from runner.report import probes as probe_report

    loaded = context.load(library_path, config)
    library = loaded.library
    chosen, unknown = pc.choose(library, list(probes), all_probes or status_only)
    if unknown:
        known = ", ".join(p.uid for p in library.probes) or "none"
        fail_usage(f"no such probe: {', '.join(unknown)} (probes in this library: {known})")
    if not library.probes:
        click.echo(f"No tier-2 probes in {library.read_from()} (evals/probes/<id>/probe.json beside a skill): "
                   "nothing to calibrate.")
        return
    if not chosen:
        fail_usage("name the probes to calibrate (uid, id or folder), or --all")
    console = Console(soft_wrap=True, highlight=False)
    if status_only:
        probe_report.print_statuses([pc.status(library, p) for p in chosen], console, fmt)
        return
    gate = context.floor_gate(loaded, run_library_validator=True, strict=False, validator_sandbox=validator_sandbox)
    context.stop_on_floor(gate, "nothing was started")
    held = pc.held_back(chosen, gate)
    if held:
        for uid, hold in held.items():
            click.echo(f"skill-evals: not calibrated: {uid} is held back by the floor ({hold.reason}): "
                       f"{hold.detail}", err=True)
        chosen = [p for p in chosen if p.uid not in held]
        if not chosen:
            context.floor_failed("nothing was started", scope=" for every chosen probe")
    settings, _ = runs_mod.apply_options(loaded.settings, context.run_options(
        loaded.settings, host=host, model=model, max_usd=max_usd, concurrency=concurrency, judge_model=judge_model))
    settings = pc.with_invocation(settings, explicit)
    if runs_mod.kill_switch(settings, os.environ):
        console.print("Kill switch on ([run] disabled or SKILL_EVALS_DISABLED): nothing was started.")
        return
    credentials = context.credentials()
    if not credentials.api_key:
        fail_usage("calibration runs live sessions and needs ANTHROPIC_API_KEY; nothing was started")
    prices = prices_mod.load(settings)
    judge, unavailable = runs_mod.make_judge(settings, credentials, prices, loaded.root)
    if judge is None:
        fail_usage(f"calibration grades the act with the judge, which is not available ({unavailable}); "
                   "nothing was started")
    hosts_key = credentials.for_host(settings.run.host)  # the judge above keeps the Anthropic key
    if not hosts_key.api_key:
        fail_usage(f"the {settings.run.host} host's sessions need {runs_mod.key_variable(settings.run.host)}; "
                   "nothing was started")
    the_host = runs_mod.make_host(settings.run.host, library, settings, hosts_key, prices, hosts_key.api_key or "")
    prepared = calibration_run.prepare(library, settings, the_host, judge, prices, chosen)
    for reason in prepared.refused:
        click.echo(f"skill-evals: not calibrated: {reason}", err=True)
    records, cancelled = calibration_run.run_all(prepared.calibrations) if prepared.calibrations else ([], False)
    probe_report.print_records(records, prepared.declaration, prepared.ledger, console, fmt)
    if cancelled:
        sys.exit(130)
    failed = prepared.refused or held or any(r.status != "finished" for r in records)
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)
