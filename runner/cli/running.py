"""`run`, `judge` and `merge`: the commands that execute a plan (or judge it again) and write a run folder."""

from __future__ import annotations

import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import click
from click.core import ParameterSource
from rich.console import Console

from runner.cli import context, options
from runner.cli.app import EXIT_OK, fail_usage
from runner.cli.environment import JUDGE_ENVIRONMENT, RUN_ENVIRONMENT
from runner.cli.folders import read_plan, read_results
from runner.cli.printing import print_cache, print_plan, print_results, print_selection_note, sessions_left
from runner.corpus import files as files_mod
from runner.corpus import trust
from runner.floor import gate as floor_mod

if TYPE_CHECKING:
    from runner.judge.prose import Grader

# What a resume keeps from its plan: the selection, the host, the model, N and k, every bound of a session and the
# run folder. Changing any of them would mix two plans in one results file. Only the cap may be given again.
RESUME_KEEPS = ("tier", "skills", "cases", "neighbours", "base", "head", "previous", "period", "selection_file",
                "shard", "host",
                "model", "repeats", "quorum", "concurrency", "early_stop", "verdict", "baseline", "max_turns", "timeout_s",
                "listing_budget", "judge_model", "no_judge", "batch", "out", "quarantine_file", "cache", "no_cache",
                "cache_read_only", "cache_label")


def _refuse_plan_options_on_resume(ctx: click.Context, resume_dir: Path) -> None:
    params = [p for p in ctx.command.params if isinstance(p, click.Option) and p.name in RESUME_KEEPS]
    given = [p.opts[0] for p in params
             if ctx.get_parameter_source(p.name or "") not in (None, ParameterSource.DEFAULT,
                                                                ParameterSource.DEFAULT_MAP)]
    if given:
        fail_usage(f"--resume {resume_dir} continues that folder's plan and keeps what it planned "
                   f"({', '.join(p.opts[0] for p in params)}); {', '.join(given)} cannot change it: start a new run "
                   "for that. A resume takes only --max-usd, the cap for the whole run folder (the spend already "
                   "recorded counts against it)")


def untrusted_cap(loaded: context.Loaded, run_options: dict[str, object], resume_dir: Path | None) -> None:
    """--untrusted-settings: refuse what the repository may not set; a new run's cap is then --max-usd (else the
    runner's default) lowered by [run] max_usd. A resume keeps its folder's cap (or takes --max-usd), which the
    repository's value may not exceed either."""
    given = run_options.get("max_usd")
    max_usd = given if isinstance(given, float) else None
    if resume_dir is None:
        run_options["max_usd"] = context.untrusted_cap(loaded, max_usd)
    elif max_usd is None and (resume_dir / "plan.json").exists():
        context.refuse_untrusted_settings(loaded, read_plan(resume_dir).cap_usd)
    else:
        context.refuse_untrusted_settings(loaded, max_usd if max_usd is not None else trust.RUNNER_CAP_USD)


BATCH_HELP = ("(half the price; results can take up to 24 hours). Batch ids are recorded in the run folder, so "
              "{again} polls the same batches instead of paying again.")


@click.command(short_help="Validate, plan, execute the evals, write results.json.", epilog=RUN_ENVIRONMENT)
@options.library_option
@options.config_option
@options.settings_commit_option
@options.run_options
@options.out_folder_option("Run folder (default runs/<timestamp>): a new or empty folder; one that holds a run is "
                           "refused (continue it with --resume).", new_run=True)
@options.floor_options
@options.untrusted_option
@click.option("--container", is_flag=True,
              help="Build the runner image from the Dockerfile and run inside it: the repository mounted read-only, "
                   "no network (the Messages API only, through a proxy on this machine that holds the API key: "
                   "the key never enters the container), a read-only root filesystem, and a time limit from the "
                   "plan.")
@click.option("--base-image", default=None, envvar="SKILL_EVALS_BASE_IMAGE",
              help="With --container: the image to build from (default: the Dockerfile's, python:3.12-slim).")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              callback=options.resumable_folder,
              help="Continue this run folder's plan; finished attempts are not run again. The plan keeps its "
                   "selection, host, model, N, k and bounds; only --max-usd may be given (the cap of the whole "
                   "folder, its spend so far included).")
@options.batch_option("Send the model turns of api-host sessions and the judge calls through the Message Batches "
                      "API " + BATCH_HELP.format(again="--resume"))
@options.batch_poll_option
def run(library_path: Path, config: Path | None, out: Path | None, resume_dir: Path | None, container: bool,
        base_image: str | None, no_library_validator: bool, strict: bool = False, batch: bool = False,
        batch_poll_s: float = 30.0, validator_sandbox: str = "none", untrusted_settings: bool = False,
        settings_commit: str | None = None, **run_options: object) -> None:
    """Validate, audit the surface, plan, execute, and write results.json."""
    if resume_dir:
        _refuse_plan_options_on_resume(click.get_current_context(), resume_dir)
        if (resume_dir / "plan.json").exists():
            read_plan(resume_dir)  # unreadable: one line that names the file, before the floor runs
    if container:
        from runner.cli.incontainer import run_in_container
        run_in_container(library_path, config, out, resume_dir, base_image, settings_commit)
        return
    start_run(library_path, config, out, resume_dir, no_library_validator, strict, batch, batch_poll_s,
              validator_sandbox, untrusted_settings, settings_commit, run_options)


@click.command("route", short_help="The routing sweep: every routing case of the library as one run.",
               epilog=RUN_ENVIRONMENT)
@options.library_option
@options.config_option
@options.settings_commit_option
@options.run_options
@options.out_folder_option("Run folder (default runs/<timestamp>): a new or empty folder; one that holds a run is "
                           "refused (continue it with `run --resume`).", new_run=True)
@options.floor_options
@options.untrusted_option
def route(library_path: Path, config: Path | None, out: Path | None, no_library_validator: bool = False,
          strict: bool = False, validator_sandbox: str = "none", untrusted_settings: bool = False,
          settings_commit: str | None = None, **run_options: object) -> None:
    """Every routing case of the library (those that name a skill that must fire or stay silent) as one run, on the
    first-turn host unless --host says otherwise: `run` with that selection, the same floor, plan, cap and reports.
    Its results.json's routing matrix is what `--previous` gives a pull request's pr tier."""
    context.routing_sweep(run_options)
    start_run(library_path, config, out, None, no_library_validator, strict, False, 30.0, validator_sandbox,
              untrusted_settings, settings_commit, run_options)


def start_run(library_path: Path, config: Path | None, out: Path | None, resume_dir: Path | None,
              no_library_validator: bool, strict: bool, batch: bool, batch_poll_s: float, validator_sandbox: str,
              untrusted_settings: bool, settings_commit: str | None, run_options: dict[str, object]) -> None:
    """The body of `run` on this machine, which `route` shares: floor, plan, execution, results.json, exit."""
    from runner.cli import comparing
    from runner.execute.progress import reporter
    from runner.execute.rundir import RunDir
    from runner.pipeline import each_host as hosts_pipeline
    from runner.pipeline import run as runs_mod

    console = Console(soft_wrap=True, highlight=False, stderr=False)
    loaded = context.load(library_path, config, settings_commit)
    context.refuse_no_skills(loaded, library_path)
    if untrusted_settings:
        untrusted_cap(loaded, run_options, resume_dir)
    given = run_options.get("host")
    names: list[str | None] = [*hosts_pipeline.several(given if isinstance(given, str) else None)] or [None]
    if len(names) > 1:  # the same cases on each host (runner.pipeline.each_host)
        comparing.refuse_alone({**run_options, "batch": batch})
    chosen = None if resume_dir else [context.run_options(loaded.settings, loaded, **{**run_options, "host": name},
                                                          batch=batch) for name in names]
    if not resume_dir and out is None and (problem := files_mod.folder_problem(Path("runs"))):
        fail_usage(f"the default run folder (runs/<time>, no --out) cannot be used: {problem}; give --out a folder "
                   "that can be written")
    floor_findings = context.floor(loaded, not no_library_validator, validator_sandbox=validator_sandbox)
    gate = floor_mod.gate(floor_findings, loaded.library, strict)
    context.stop_on_floor(gate, "nothing was run")
    console.print(context.floor_line(floor_findings, gate, no_library_validator), markup=False)
    credentials = context.credentials()
    if chosen is not None and len(chosen) > 1:
        comparing.run_hosts(loaded, chosen, gate, credentials, out, console)
    if resume_dir and comparing.is_comparison(resume_dir):
        given_cap = run_options.get("max_usd")
        comparing.resume_hosts(loaded, resume_dir, credentials, given_cap if isinstance(given_cap, float) else None,
                               console)
    try:
        if resume_dir:
            # Same library content as planned (prepare_resume checks the hash), so the plan's holds still apply.
            rundir = RunDir(resume_dir)
            max_usd = run_options.get("max_usd")
            prepared = runs_mod.prepare_resume(rundir, loaded.library, loaded.settings, credentials,
                                               max_usd=max_usd if isinstance(max_usd, float) else None)
        else:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            rundir = RunDir(out or Path("runs") / stamp)
            # With the run folder, prepare locks it (a second process on it is refused) before the host exists.
            assert chosen is not None
            prepared = runs_mod.prepare(loaded.library, loaded.settings, chosen[0],
                                        credentials, audit=True, floor=gate, rundir=rundir)
            runs_mod.write_plan(rundir, prepared)
    except ValueError as exc:  # the stages' own kinds (a resume, a quarantine file, a selection) are UsageErrors
        fail_usage(str(exc))
    # Without a key, what to do comes first: the plan's arithmetic below is long.
    if prepared.plan.unrun_all == "no-credentials":
        console.print(runs_mod.for_key_of(runs_mod.HOW_TO_GET_RESULTS, prepared.plan.host) + " "
                      + runs_mod.HOW_TO_RESUME.format(folder=rundir.path), markup=False)
    elif prepared.idle == "no-credentials":
        console.print(runs_mod.for_key_of(runs_mod.RESUMED_WITHOUT_KEY, prepared.plan.host).format(folder=rundir.path),
                      markup=False)
    print_selection_note(prepared, console)
    print_plan(prepared.plan, console)
    print_cache(prepared.cache, prepared.plan, console)
    if resume_dir and run_options.get("max_usd") is not None:
        console.print(f"Resume: cap ${prepared.plan.cap_usd:.2f} for the whole run folder (the plan's was "
                      f"${runs_mod.load_plan(rundir).cap_usd:.2f}); the spend already recorded counts against it")
    with reporter(sessions_left(prepared.plan)[1], prepared.plan.cap_usd, runs_mod.is_terminal()) as progress:
        batch = batch or prepared.plan.batch  # a batched run resumes batched
        if batch:
            from runner.pipeline.batched import execute_batched
            results = execute_batched(prepared, rundir, credentials, progress, batch_poll_s)
        else:
            results = runs_mod.execute(prepared, rundir, progress)
    print_results(results, rundir.path, console)
    if batch:
        from runner.execute import batch as batch_mod
        console.print(batch_mod.summary(rundir.path / batch_mod.BATCHES), markup=False)
    sys.exit(130 if results.stop_reason == "cancelled" else EXIT_OK)


@click.command("judge", short_help="Judge a finished run again from its stored answers.", epilog=JUDGE_ENVIRONMENT)
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@options.library_option
@options.config_option
@options.judge_model_option
@options.max_usd_option("Cap on the judge calls (default [run] max_usd).")
@options.batch_option("Send the judge calls through the Message Batches API "
                      + BATCH_HELP.format(again="`judge` again on the same run"))
@options.batch_poll_option
def judge_command(run_dir: Path, library_path: Path, config: Path | None, judge_model: str | None,
                  max_usd: float | None, batch: bool = False, batch_poll_s: float = 30.0) -> None:
    """Judge a finished run again from its stored answers (no session), into a new results file."""
    from runner.execute.rundir import RunDir
    from runner.hosts import prices as prices_mod
    from runner.pipeline import rejudge as rejudge_mod
    from runner.pipeline import run as runs_mod

    loaded = context.load(library_path, config)
    rundir = RunDir(run_dir)
    credentials = context.credentials()
    if not credentials.api_key:
        fail_usage("judging needs ANTHROPIC_API_KEY; nothing was judged")
    plan = read_plan(run_dir)
    if (run_dir / "results.json").exists():
        read_results(run_dir)  # compared with the new results afterwards: unreadable is refused before any spend
    if plan.library.content_hash != loaded.library.content_hash:
        fail_usage(f"{run_dir}: the library changed since this run; its assertions would not be the ones judged")
    settings = context.with_judge_model(loaded.settings, judge_model)
    prices = prices_mod.load(settings)
    made, unavailable = runs_mod.make_judge(settings, credentials, prices, loaded.root)
    if made is None:
        fail_usage(f"the judge is not available ({unavailable})")
    the_judge: Grader = made
    concurrency = 4
    if batch:
        from runner.execute import batch as batch_mod
        broker = batch_mod.make_broker(credentials.api_key or "", credentials.base_url,
                                       rundir.path / batch_mod.BATCHES, batch_poll_s)
        the_judge = batch_mod.BatchJudge(made, broker)
        concurrency = batch_mod.MAX_REQUESTS  # every judge call waits on the batch, none on a slot
    target, results, changes = rejudge_mod.rejudge(
        rundir, {c.uid: c for c in loaded.library.cases}, runs_mod.known_names(loaded.library), the_judge,
        max_usd if max_usd is not None else settings.run.max_usd, concurrency=concurrency,
        probes={p.uid: p for p in loaded.library.probes})
    console = Console(soft_wrap=True, highlight=False)
    print_results(results, target.path, console)
    console.print(f"Re-judged with {the_judge.settings.model} (prompt {the_judge.version}): {len(changes)} change(s); "
                  f"see {target.path / 'changes.json'}")
    for change in changes[:20]:
        console.print(f"  {change.uid} {change.what}: {change.before} → {change.after}", markup=False)
    sys.exit(EXIT_OK)


@click.command(short_help="Combine the shards of one plan into one run folder.")
@click.argument("shards", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False, exists=True))
@options.out_folder_option("The merged run folder to write (attempts, transcripts and a recomputed results.json): "
                           "a new or empty folder.", required=True, new_run=True)
def merge(shards: tuple[Path, ...], out: Path) -> None:
    """Combine the shards of one plan into one run folder and recompute every rollup."""
    from runner.results import merge as merge_mod

    results = merge_mod.merge_dirs(list(shards), out)  # MergeError: a usage error, printed by the command group
    print_results(results, out, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_OK)
