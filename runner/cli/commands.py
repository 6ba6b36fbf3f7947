"""The command line: `skill-evals validate | census` (and `python -m runner`).

Exit codes: 0 no error-level finding, 1 an error-level finding, 2 a usage error or a path that
holds no library. Bad input never produces a traceback: it produces findings.
"""

from __future__ import annotations

import asyncio
import io
import math
import os
import sys
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.core import ParameterSource
from rich.console import Console

from runner.corpus import files as files_mod
from runner.corpus import findings as findings_mod
from runner.corpus import settings as settings_mod
from runner.corpus.findings import Finding, is_unicode, printable
from runner.corpus.library import Library, LibraryError, find_root, load_library
from runner.floor import gate as floor_mod
from runner.floor import validate as validate_mod

if TYPE_CHECKING:
    from runner.execute import run as runs_mod
    from runner.floor.surface import Surface
    from runner.judge.prose import Grader
    from runner.plan import build as plan_mod
    from runner.results import build as results_mod

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
_F = TypeVar("_F", bound=Callable[..., Any])  # a command function that option decorators return as is


@dataclass
class Loaded:
    library: Library
    settings: settings_mod.Settings
    findings: list[Finding]
    root: Path


def _load(library_path: Path, config: Path | None) -> tuple[Loaded | None, list[Finding]]:
    """Settings, then the corpus. Returns None (and an error) when there is no library at the path."""
    root, _ = find_root(library_path)
    settings_file = config or root / settings_mod.SETTINGS_FILE
    settings, found = settings_mod.load(settings_file, root)
    library, corpus_findings = load_library(library_path, settings, settings_file if settings_file.exists() else None)
    return Loaded(library=library, settings=settings, findings=found + corpus_findings, root=root), found


def _fail_usage(message: str) -> None:
    click.echo(f"skill-evals: {message}", err=True)
    sys.exit(EXIT_USAGE)


def _sandbox_option(f: _F) -> _F:
    return click.option(
        "--validator-sandbox", type=click.Choice(["container", "none"]), default="none", show_default=True,
        envvar="SKILL_EVALS_VALIDATOR_SANDBOX",
        help="Where the library's own validator (the repository's code) runs: container = a throwaway container "
             "with no network, no secrets, the repository read-only (needs Docker; what the action uses); none = "
             "on this machine as this user, only for code you trust.")(f)


def _checked_library(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    # Checked while the options are parsed, before a command body imports the live-execution
    # modules (anthropic, claude_agent_sdk: seconds): a wrong path is refused in a fraction of one.
    if not ctx.resilient_parsing:
        try:
            find_root(value)
        except LibraryError as exc:
            _fail_usage(str(exc))
    return value


library_option = click.option(
    "--library", "library_path", type=click.Path(path_type=Path), default=Path("."), show_default=True,
    callback=_checked_library,
    help="A repository root (any layout: .claude/skills, skills/ with or without categories, a plugin marketplace, "
         "...), a folder of skills, or one skill's folder.")
# exists=True: a settings file that is not there is a usage error, never the defaults in silence (a typo in the
# name would run with the $10 default cap instead of the file's).
config_option = click.option(
    "--config", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None,
    help="Settings file (default: .skill-evals.toml at the repository root); it must exist.")


# The environment variables a command reads, at the end of its --help ("\b": click keeps the lines as written).
def _environment(title: str, *rows: tuple[str, str]) -> str:
    """An epilog that lists the variables, one column for the names; "\\n" in a text continues it below."""
    width = max(len(name) for name, _ in rows)
    lines = ["\b", title]
    for name, text in rows:
        first, *more = text.split("\n")
        lines.append(f"  {name:<{width}}  {first}")
        lines += [" " * (width + 4) + line for line in more]
    return "\n".join(lines)


_API_VARIABLES = (
    ("ANTHROPIC_API_KEY", ("the Messages API key; without it nothing is\nsent to a model: every case is UNRUN\n"
                           "(no-credentials), exit 0")),
    ("ANTHROPIC_BASE_URL", "another Messages API endpoint (a proxy)"),
    ("SKILL_EVALS_DISABLED", "1, true or yes: the kill switch (every case\nUNRUN kill-switch, exit 0)"))
_VALIDATOR_VARIABLES = (
    ("SKILL_EVALS_VALIDATOR_SANDBOX", "--validator-sandbox's default"),
    ("SKILL_EVALS_VALIDATOR_IMAGE", "--validator-sandbox container: its image\n(else SKILL_EVALS_IMAGE, else built)"),
    ("DOCKER_HOST", "the Docker daemon a container needs"))
VALIDATE_ENVIRONMENT = _environment("Environment:", *_VALIDATOR_VARIABLES)
PLAN_ENVIRONMENT = _environment("Environment:", *_API_VARIABLES, *_VALIDATOR_VARIABLES)
RUN_ENVIRONMENT = _environment(
    "Environment (no other variable reaches a session; never GITHUB_TOKEN):", *_API_VARIABLES,
    ("SKILL_EVALS_BASE_IMAGE", "--base-image's default"),
    ("SKILL_EVALS_IMAGE", "--container: an image already built or loaded"),
    ("SKILL_EVALS_SOURCE", "--container: the skill-evals source to build"),
    ("CI", "set: no live progress line"),
    ("TMPDIR", "set: session folders go there, not /dev/shm"),
    *_VALIDATOR_VARIABLES)
JUDGE_ENVIRONMENT = _environment(
    "Environment:", ("ANTHROPIC_API_KEY", "the Messages API key (nothing is judged without it)"),
    ("ANTHROPIC_BASE_URL", "another Messages API endpoint (a proxy)"))
CALIBRATE_ENVIRONMENT = _environment("Environment:", *_API_VARIABLES, *_VALIDATOR_VARIABLES)
PUBLISH_ENVIRONMENT = _environment(
    "Environment (what GitHub Actions sets):",
    ("GITHUB_TOKEN", "the token (checks: write, pull-requests: write);\nwithout it nothing is posted to GitHub"),
    ("GITHUB_REPOSITORY", "owner/name; without it nothing is posted"),
    ("GITHUB_SHA", "the commit the check run is on"),
    ("GITHUB_EVENT_PATH", "the event payload: the pull request, its head"),
    ("GITHUB_EVENT_NAME", "pull_request, pull_request_target, ..."),
    ("GITHUB_STEP_SUMMARY", "the job summary file the rollup is appended to"),
    ("GITHUB_RUN_ID", "the workflow run, linked as the check's details"),
    ("GITHUB_API_URL", "the REST API (default https://api.github.com)"),
    ("GITHUB_SERVER_URL", "the web server (default https://github.com)"),
    ("GITHUB_WORKSPACE", "the repository root when git cannot tell it"))


# ---- option values ---------------------------------------------------------------------------------------------
# Every number an option takes is checked while the options are parsed: a value out of range is a usage error that
# names the option (exit 2), before anything is loaded, started or spent.

class FiniteFloat(click.FloatRange):
    """A float within bounds that is a number: `nan` and `inf` parse as floats, and are neither a cap nor a bound."""

    name = "number"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = value if isinstance(value, float) else click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


class OddInt(click.IntRange):
    """N of the quorum rule: odd, so that it cannot tie."""

    name = "odd integer"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if number % 2 == 0:
            self.fail(f"{number} is even: N must be odd (an even N can tie)", param, ctx)
        return number


USD = FiniteFloat(min=0)
SESSION_SECONDS = FiniteFloat(min=0, min_open=True, max=settings_mod.MAX_SESSION_S)
POLL_SECONDS = FiniteFloat(min=0, min_open=True, max=settings_mod.MAX_SESSION_S)
AT_LEAST_ONE = click.IntRange(min=1)
TURNS = click.IntRange(min=1, max=settings_mod.MAX_TURNS)
REPEATS = OddInt(min=1, max=settings_mod.MAX_REPEATS)


def _writable_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A folder the command will write (a run folder, plan.json's folder): one that cannot be made or written is a
    usage error now, not an OSError after the sessions were paid for."""
    if value is not None and not ctx.resilient_parsing and (problem := files_mod.folder_problem(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def _writable_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None and not ctx.resilient_parsing and (problem := files_mod.file_problem(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def _checked_selection(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--selection FILE: a file `skill-evals select` wrote; anything else is a usage error that says where the JSON
    breaks or which key is wrong (never pydantic's dump), before anything is loaded."""
    if value is not None and not ctx.resilient_parsing:
        from runner.plan.select import Selection
        from runner.results import modelfile
        try:
            modelfile.read(value, Selection, "a selection written by `skill-evals select`")
        except modelfile.Unreadable as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return value


class _Commands(click.Group):
    """The command group. Every argument must be UTF-8: names, globs and paths end up in JSON, reports and a
    terminal, which hold UTF-8 only. Linux hands a program any bytes (Python decodes those that are not UTF-8 as
    lone surrogates); such an argument is a usage error that names its option, never a crash further on."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        for position, arg in enumerate(args):
            if not is_unicode(arg):
                before = args[position - 1] if position else ""
                option = (arg.split("=", 1)[0] if arg.startswith("--") and "=" in arg else
                          before if before.startswith("-") else "an argument")
                raise click.UsageError(f"{option}: {printable(arg)!r} is not valid UTF-8 (names, globs and paths are "
                                       "written into UTF-8 JSON and reports)", ctx)
        return super().parse_args(ctx, args)


def _printing_never_fails() -> None:
    """A terminal that cannot show a character (an ASCII locale) gets an escape, never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, io.UnsupportedOperation):
            pass


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skill-evals")
def main() -> None:
    """Execute the evals of an Agent Skills library, honestly."""
    _printing_never_fails()


@main.command(short_help="The floor: the library's own validator, then our checks.", epilog=VALIDATE_ENVIRONMENT)
@library_option
@config_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text", show_default=True,
              help="github = workflow commands that annotate the files in a pull request.")
@click.option("--validator-command", default=None,
              help="The library's own validator, run first from the repository root (default: "
                   "scripts/validate-skills.py when present, or [validator] command in the settings).")
@click.option("--no-library-validator", is_flag=True, help="Do not run the library's own validator.")
@_sandbox_option
@click.option("--floor-summary", type=click.Path(path_type=Path, dir_okay=False), default=None,
              callback=_writable_file,
              help="Also write, as JSON, what the errors would keep `run` from running: `scope` none | skills | "
                   "library, the skills held back and the cases found invalid (the action runs the evals of what "
                   "the floor does not hold back).")
def validate(library_path: Path, config: Path | None, fmt: str, validator_command: str | None,
             no_library_validator: bool, validator_sandbox: str = "none", floor_summary: Path | None = None) -> None:
    """The floor: the library's own validator, then schemas, frontmatter, references, probes, safety."""
    loaded = _load_or_exit(library_path, config)
    library = loaded.library
    results = _floor(loaded, run_library_validator=not no_library_validator, validator_command=validator_command,
                     validator_sandbox=validator_sandbox)
    if floor_summary is not None:
        floor_summary.write_text(floor_mod.summary(floor_mod.gate(results, library)).model_dump_json(indent=2),
                                 encoding="utf-8")
    if fmt == "json":
        layout = library.layout
        click.echo(findings_mod.render_json(results, {
            "library": library.skills_dir, "skills": len(library.skills), "cases": len(library.cases),
            **({"layout": layout.kind, "roots": layout.roots, "layout_note": layout.note} if layout else {})}))
    elif fmt == "github":
        from runner.corpus import repopath  # GitHub reads `file=` from the repository root, not the library's
        click.echo(findings_mod.render_github(results, repopath.prefix(loaded.root)))
    else:
        click.echo(findings_mod.render_text(results))
        click.echo(f"checked {len(library.skills)} skill(s), {len(library.cases):,} case(s), "
                   f"{len(library.probes)} probe(s) in {library.skills_dir}")
        if library.layout is not None:
            click.echo(f"layout: {library.layout.description}; read {', '.join(library.layout.roots) or 'nothing'} "
                       f"({library.layout.note})")
    sys.exit(EXIT_FINDINGS if findings_mod.has_errors(results) else EXIT_OK)


@main.command(short_help="What the eval corpus contains: cases, refusals, assertions.")
@library_option
@config_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text = tables for a person; json = every count, list and rule (with the library's layout).")
def census(library_path: Path, config: Path | None, fmt: str) -> None:
    """What the eval corpus contains: cases by kind, refusals, assertion classes, listing budget."""
    try:
        loaded, _ = _load(library_path, config)
    except LibraryError as exc:
        _fail_usage(str(exc))
        return
    assert loaded is not None
    from runner.floor import census as census_mod  # imported here: rich costs start-up time `validate` need not pay

    results = loaded.findings + validate_mod.check_library(loaded.library, loaded.settings)
    report = census_mod.compute(loaded.library, loaded.settings, results)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        census_mod.render_text(report, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_OK)


# ---- live execution ----------------------------------------------------------------------------

def _run_options(f: _F) -> _F:
    options = [
        click.option("--tier", type=click.Choice(["pr", "cadence", "full"]), default="full", show_default=True,
                     help="Repeats and quorum come from [tiers.<tier>]."),
        click.option("--skill", "skills", multiple=True, help="Only the cases of this skill (repeatable)."),
        click.option("--case", "cases", multiple=True, help="Only cases whose uid matches this glob (repeatable)."),
        click.option("--neighbours", is_flag=True, help="With --skill: add the skills each names as a neighbour."),
        click.option("--base", default=None,
                     help="--tier pr: the pull request's base ref; the cases of skills changed in base...head "
                          "and their neighbours are selected."),
        click.option("--head", default=None, help="--tier pr: the head ref (default HEAD)."),
        click.option("--period", default=None,
                     help="--tier cadence: the period key that picks the rotating slot (default [select] period, "
                          "else this ISO week, e.g. 2026-W48)."),
        click.option("--host", type=click.Choice(["claude-code", "api"]), default=None,
                     help="Default from [run] host (claude-code)."),
        click.option("--model", default=None,
                     help="The model every session runs on (default [run] model, claude-sonnet-4-6); its price comes "
                          "from runner/data/prices.json or [prices]."),
        click.option("--repeats", type=REPEATS, default=None,
                     help=f"N (odd, at most {settings_mod.MAX_REPEATS:,})."),
        click.option("--quorum", type=AT_LEAST_ONE, default=None, help="k (> N/2, ≤ N); default the majority of N."),
        click.option("--max-usd", type=USD, default=None,
                     help="Hard cap on this run's spend (≥ 0). With --resume: the cap of the whole run folder, the "
                          "spend already recorded included."),
        click.option("--concurrency", type=AT_LEAST_ONE, default=None,
                     help="Sessions at once, at most (default [run] concurrency, 4); halved on a 429 and grown back; "
                          "the cap may allow fewer."),
        click.option("--no-early-stop", "early_stop", flag_value=False, default=None,
                     help="Run every repeat (fixed N) instead of stopping once the quorum is decided."),
        click.option("--max-turns", type=TURNS, default=None,
                     help=f"Model turns per session, 1 to {settings_mod.MAX_TURNS:,} (default [run] max_turns, 6); "
                          "a session cut by it counts only for what is already certain."),
        click.option("--timeout", "timeout_s", type=SESSION_SECONDS, default=None,
                     help="Seconds per session (> 0, at most a day)."),
        click.option("--listing-budget", type=AT_LEAST_ONE, default=None,
                     help="SLASH_COMMAND_TOOL_CHAR_BUDGET for every session (default: the host's own)."),
        click.option("--judge-model", default=None, help="Default: [judge] model."),
        click.option("--no-judge", is_flag=True, default=None,
                     help="Do not judge prose assertions (they stay UNRUN judge-disabled)."),
        click.option("--selection", "selection_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                     default=None, callback=_checked_selection,
                     help="Use the selection `skill-evals select` wrote (instead of selecting again)."),
        click.option("--shard", default=None,
                     help="i/n: execute every n-th case of the plan, starting at the i-th (same plan for every "
                          "shard; merge the shards with `skill-evals merge`)."),
    ]
    for option in reversed(options):
        f = option(f)
    return f


def _options(settings: settings_mod.Settings, **kw: object) -> "runs_mod.Options":
    """The options of one command, checked against the settings they change (k against N, which may come from
    [tiers.<tier>]): a usage error naming the option, before the floor runs and before anything is started."""
    from runner.execute import run as runs_mod
    try:
        kw["shard"] = runs_mod.parse_shard(kw.get("shard"))  # type: ignore[arg-type]
        options = runs_mod.Options(**kw)  # type: ignore[arg-type]
        runs_mod.apply_options(settings, options)
    except ValueError as exc:
        _fail_usage(str(exc))
        raise  # unreachable: _fail_usage exits
    return options


# What a resume keeps from its plan: the selection, the host, the model, N and k, every bound of a session and the
# run folder. Changing any of them would mix two plans in one results file. Only the cap may be given again.
RESUME_KEEPS = ("tier", "skills", "cases", "neighbours", "base", "head", "period", "selection_file", "shard", "host",
                "model", "repeats", "quorum", "concurrency", "early_stop", "max_turns", "timeout_s", "listing_budget",
                "judge_model", "no_judge", "batch", "out")


def _refuse_plan_options_on_resume(ctx: click.Context, resume_dir: Path) -> None:
    params = [p for p in ctx.command.params if isinstance(p, click.Option) and p.name in RESUME_KEEPS]
    given = [p.opts[0] for p in params
             if ctx.get_parameter_source(p.name or "") not in (None, ParameterSource.DEFAULT,
                                                                ParameterSource.DEFAULT_MAP)]
    if given:
        _fail_usage(f"--resume {resume_dir} continues that folder's plan and keeps what it planned "
                    f"({', '.join(p.opts[0] for p in params)}); {', '.join(given)} cannot change it: start a new run "
                    "for that. A resume takes only --max-usd, the cap for the whole run folder (the spend already "
                    "recorded counts against it)")


def _load_or_exit(library_path: Path, config: Path | None) -> Loaded:
    try:
        loaded, _ = _load(library_path, config)
    except LibraryError as exc:
        _fail_usage(str(exc))
        raise  # unreachable: _fail_usage exits
    assert loaded is not None
    return loaded


def _validator_findings(loaded: Loaded, validator_command: str | None, validator_sandbox: str) -> list[Finding]:
    """The library's own validator, run where --validator-sandbox says (it is the repository's code)."""
    settings = loaded.settings
    validator = validate_mod.find_library_validator(loaded.root, settings, validator_command)
    execute: validate_mod.Executor = validate_mod.run_on_host
    if validator is not None and validator_sandbox == "container":
        from runner.container import sandbox as sandbox_mod
        try:
            execute = sandbox_mod.open_sandbox(CONTAINER_TAG)
        except sandbox_mod.SandboxUnavailable as exc:
            _fail_usage(f"--validator-sandbox container: {exc}; or --validator-sandbox none runs the library's "
                        "validator on this machine, as you: only for a repository whose every contributor you trust")
    return validate_mod.run_library_validator(loaded.root, validator, settings.validator.timeout_s, execute)


def _floor(loaded: Loaded, run_library_validator: bool = True, validator_command: str | None = None,
           validator_sandbox: str = "none") -> list[Finding]:
    """The settings' and the corpus's findings, the library's own validator, then our checks: what `validate`
    reports, and what the floor of `plan`, `run` and `calibrate` is made of."""
    results = list(loaded.findings)
    settings = loaded.settings
    if settings.validator.enabled and run_library_validator:
        results += _validator_findings(loaded, validator_command, validator_sandbox)
    results += validate_mod.check_library(loaded.library, settings)
    return results


def _floor_gate(loaded: Loaded, run_library_validator: bool, strict: bool, validator_sandbox: str = "none"
                ) -> floor_mod.FloorGate:
    """The one way `plan`, `run` and `calibrate` learn what the floor keeps from running."""
    return floor_mod.gate(_floor(loaded, run_library_validator, validator_sandbox=validator_sandbox), loaded.library,
                          strict)


def _stop_on_floor(gate: floor_mod.FloorGate, outcome: str, fmt: str = "text") -> None:
    """Exit 1 when the floor stops everything (a library-level error, or any error with --strict)."""
    if not gate.stops_everything:
        return
    shown = gate.errors()
    click.echo(findings_mod.render_json(shown) if fmt == "json" else findings_mod.render_text(shown))
    why = ("--strict: every error stops the run" if not gate.library else
           "a library-level error (the library's validator or the settings) stops every skill")
    click.echo(f"skill-evals: the floor failed ({why}; see `skill-evals validate`); {outcome}", err=True)
    sys.exit(EXIT_FINDINGS)


def _floor_line(found: list[Finding], gate: floor_mod.FloorGate, skipped_validator: bool = False) -> str:
    """The floor in one line when it let the run go on: a floor that passes is said, never silent."""
    c = findings_mod.counts(found)
    held = []
    if gate.skills:
        held.append(f"{len(gate.skills)} skill(s) held back")
    if gate.cases:
        held.append(f"{len(gate.cases)} invalid case(s)")
    if gate.absent:
        held.append(f"{len(gate.absent)} skill folder(s) not read")
    return (f"Floor: {c['error']} error(s), {c['warning']} warning(s), {c['info']} note(s)"
            + (f" ({', '.join(held)}: listed below)" if held else "")
            + ("; the library's validator was not run here (--no-library-validator)" if skipped_validator else "")
            + ("; `skill-evals validate` lists them" if any(c.values()) else ""))


def _untrusted_option(f: _F) -> _F:
    return click.option(
        "--untrusted-settings", is_flag=True,
        help="The settings file belongs to the code under review (a pull request can write it): refuse settings "
             "that choose a program to execute beside the API key ([run] cli_path). The action passes it.")(f)


def _refuse_settings_executables(loaded: Loaded) -> None:
    """--untrusted-settings: a program named by the repository's settings would run with the API key."""
    cli_path = loaded.settings.run.cli_path
    if cli_path:
        shown = cli_path if len(cli_path) <= 80 else cli_path[:77] + "..."
        _fail_usage(f"--untrusted-settings: the settings name a program to execute with the API key ([run] cli_path "
                    f"= {shown!r}), and they come from the repository under review, so they are refused. Remove "
                    "[run] cli_path (the CLI bundled with claude-agent-sdk is used), or leave out "
                    "--untrusted-settings for a repository whose every contributor you trust")


def _floor_options(f: _F) -> _F:
    options = [
        click.option("--no-library-validator", is_flag=True,
                     help="Skip the library's own validator here (run it first, without secrets, as the action's "
                          "validate step does: it is repository code and could read this process's environment)."),
        click.option("--strict", is_flag=True,
                     help="All or nothing: any floor error stops the run. Without it an error holds back only what "
                          "it is about (its skill's cases: floor-error; one case: invalid-case); a library-level "
                          "error (the library's validator, the settings) always stops everything."),
    ]
    for option in reversed(options):
        f = option(f)
    return _sandbox_option(f)


def _print_selection_note(prepared: "runs_mod.Prepared", console: Console) -> None:
    if prepared.selection is not None and prepared.selection.tier != "full" and prepared.selection.note:
        console.print(f"Selection: {prepared.selection.note}", markup=False)


MAX_INVALID_SHOWN = 10  # a corpus with hundreds of broken cases would bury the plan; validate lists them all


def _print_held_back(plan: "plan_mod.Plan", console: Console) -> None:
    """Which skills and cases the floor held back, and the finding that did it."""
    if plan.held_back:
        console.print(f"[yellow]Held back by the floor: {len(plan.held_back)} skill(s), their cases UNRUN "
                      "(floor-error); see `skill-evals validate`[/yellow]")
        for skill, detail in plan.held_back.items():
            console.print(f"  {skill}: {detail}", markup=False)
    if plan.not_read:
        console.print(f"[yellow]Not read: {len(plan.not_read)} skill folder(s) the floor could not read; no case of "
                      "theirs is planned[/yellow]")
        for skill, detail in plan.not_read.items():
            console.print(f"  {skill}: {detail}", markup=False)
    invalid = [c for c in plan.cases if c.unrun_detail and c.unrun_reason != "floor-error"]
    if invalid:
        console.print(f"[yellow]Cases the floor found invalid: {len(invalid)}[/yellow]")
        for case in invalid[:MAX_INVALID_SHOWN]:
            console.print(f"  {case.uid} ({case.unrun_reason}): {case.unrun_detail}", markup=False)
        if len(invalid) > MAX_INVALID_SHOWN:
            console.print(f"  … and {len(invalid) - MAX_INVALID_SHOWN} more (`skill-evals validate` lists them)")


def _cap_line(cap_usd: float, worst_session_usd: float, sessions: int) -> str:
    """What the cap means for this plan, in words that stay true when nothing runs or costs nothing."""
    if sessions == 0:
        return f"Cap: ${cap_usd:.2f}; no session to reserve (nothing is runnable)"
    if worst_session_usd <= 0:
        return (f"Cap: ${cap_usd:.2f}; the price table gives a session no cost, so the cap limits none of the "
                f"{sessions} session(s)")
    affordable = int(cap_usd // worst_session_usd)
    if affordable == 0:
        return (f"Cap: ${cap_usd:.2f} is below one session's worst case (${worst_session_usd:.4f}): no session can "
                "start; raise --max-usd")
    return (f"Cap: ${cap_usd:.2f} admits {min(affordable, sessions)} concurrent worst-case reservations; spend is "
            "reconciled from the host's usage after each session")


def _print_plan(plan: "plan_mod.Plan", console: Console) -> None:
    from runner.report.versions import host_text

    e = plan.estimate
    runnable = e.runnable_cases
    unrun = Counter(c.unrun_reason for c in plan.cases if c.unrun_reason)
    console.print(f"[bold]Plan[/bold] tier {plan.tier}; host {host_text(plan.host, plan.versions)}; "
                  f"model {plan.model}; N={plan.repeats} k={plan.quorum}; cap ${plan.cap_usd:.2f}")
    if plan.approximation:
        console.print(f"[yellow]{plan.approximation}[/yellow]")
    console.print(f"Cases selected: {len(plan.cases)}; runnable: {runnable}; not runnable: "
                  + (", ".join(f"{k} {v}" for k, v in unrun.items()) or "none"))
    _print_held_back(plan, console)
    console.print(f"Sessions: {e.sessions_min}–{e.sessions_max} (every case decided by its first k attempts … every "
                  f"repeat runs) = runnable cases × N")
    console.print(f"Tokens: first turn ≈ {e.first_turn_input_tokens:,} input tokens ({e.token_basis})")
    console.print(f"Prices ({e.price_read_on}): {e.model} ${e.price_input_per_mtok}/M input, "
                  f"${e.price_output_per_mtok}/M output, cache ${e.price_cache_write_per_mtok}/M write, "
                  f"${e.price_cache_read_per_mtok}/M read")
    console.print(f"Cache: {e.cache_layout}; shared prefix {e.cached_prefix_tokens:,} tokens, written by "
                  f"{e.cold_sessions} session(s) of the first wave"
                  + ("; a case's later sessions read its first turn" if e.repeats_read_first_turn else "")
                  + (f"; session path: {plan.session_path.mode}" if plan.session_path else "")
                  + f"; turns, growth and output per turn: {e.cost_basis}")
    console.print(f"Cost: expected ${e.expected_session_usd:.4f}/session (uncached ${e.expected_uncached_session_usd:.4f})"
                  f" → ${e.expected_usd:.2f} for {e.sessions_max} sessions; worst case ${e.worst_session_usd:.4f}/"
                  f"session (no cache; reserved before each start) → ${e.worst_usd:.2f}")
    console.print(_cap_line(plan.cap_usd, e.worst_session_usd, e.sessions_max))
    if e.expected_usd > plan.cap_usd:
        console.print(f"[yellow]The expected cost (${e.expected_usd:.2f}) is above the cap: the run will stop at "
                      f"${plan.cap_usd:.2f} and the rest will be UNRUN (budget-cap). Narrow the selection or raise "
                      "--max-usd.[/yellow]")
    # What the plan's work would judge, whether or not a judge will run (the note says which): the same with a key
    # and without. A plan written before judge_calls_planned existed has only judge_calls.
    console.print(f"Judge calls: {max(e.judge_calls_planned, e.judge_calls):,} ({e.judge_note})", markup=False)
    if plan.surface is not None:
        _print_surface(plan.surface, console, brief=True)
    warned = [c for c in plan.cases if c.warnings]
    if warned:
        console.print(f"[yellow]Surface warnings: {len(warned)} case(s) whose target or neighbours were listed "
                      "without a description[/yellow]")
    if plan.unrun_all:
        own = len(plan.cases) - runnable
        console.print(f"[bold]Nothing will start: the {runnable} runnable case(s) are UNRUN ({plan.unrun_all})"
                      + (f"; the other {own} keep their own reason (not runnable, above)" if own else "")
                      + ".[/bold]")


def _print_surface(surface: "Surface", console: Console, brief: bool = False) -> None:
    if surface.error:
        console.print(f"[red]Surface audit failed: {surface.error}[/red]")
        return
    budget = surface.listing_budget_chars or "host default"
    console.print(f"Surface ({surface.host}, listing budget {budget}): {len(surface.with_description)} library "
                  f"skill(s) listed with their description, {len(surface.name_only)} by name only, "
                  f"{len(surface.missing)} missing; {len(surface.not_from_library)} of the host's own; listing "
                  f"{surface.listing_chars:,} characters, first request {surface.request_chars:,}")
    if not brief:
        console.print("With description: " + (", ".join(surface.with_description) or "none"), markup=False)
        console.print("Name only: " + (", ".join(surface.name_only) or "none"), markup=False)
        if surface.missing:
            console.print("Missing: " + ", ".join(surface.missing), markup=False)
        console.print("Host's own: " + (", ".join(surface.not_from_library) or "none"), markup=False)


def _print_results(results: "results_mod.Results", run_dir: Path, console: Console) -> None:
    from runner.results.build import kill_note

    counts = ", ".join(f"{k} {v}" for k, v in results.counts.items() if v)
    console.print(f"[bold]Results[/bold] ({results.plan.host}, {results.plan.model}): {counts}; "
                  f"attempts {results.attempts_finished} ({results.attempts_errored} errored); spend "
                  f"${results.spend.usd:.4f} of ${results.spend.cap_usd:.2f}")
    if results.plan.approximation:
        console.print(f"[yellow]{results.plan.approximation}[/yellow]")
    if (killed := kill_note(results)) is not None:  # spend no record shows is never hidden
        console.print(f"Killed before: {killed}", markup=False)
    if results.stop_reason:
        console.print(f"Stopped early: {results.stop_reason}")
    if results.unrun_by_reason:
        console.print("UNRUN by reason: " + ", ".join(f"{k} {v}" for k, v in results.unrun_by_reason.items()))
    if results.assertion_counts:
        console.print("Assertions of executed cases: " + ", ".join(
            f"{k.replace('_', ' ')} {v}" for k, v in results.assertion_counts.items()))
    judge = results.plan.judge_model or f"none ({results.plan.judge_unavailable})"
    console.print(f"Judge: {judge}; {results.spend.judge_calls} call(s), ${results.spend.judge_usd:.4f}")
    console.print(results.not_executed)
    console.print(f"Results: {run_dir / 'results.json'}")


@main.command(short_help="Which skills the model sees, with or without description.")
@library_option
@config_option
@click.option("--host", type=click.Choice(["claude-code", "api"]), default=None,
              help="claude-code = the listing Claude Code builds; api = the direct-API approximation's. Default "
                   "[run] host (claude-code).")
@click.option("--model", default=None,
              help="The model named in the captured request (default [run] model); no model is called.")
@click.option("--listing-budget", type=AT_LEAST_ONE, default=None,
              help="SLASH_COMMAND_TOOL_CHAR_BUDGET: characters of the skill listing (default: the host's own).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text = counts and names; json = surface.json (every skill, the request's size).")
def surface(library_path: Path, config: Path | None, host: str | None, model: str | None,
            listing_budget: int | None, fmt: str) -> None:
    """What the model is shown: which skills keep their description (no spend, no key)."""
    loaded = _load_or_exit(library_path, config)  # before the slow import below: a bad path fails fast
    from runner.execute import run as runs_mod

    settings, _ = runs_mod.apply_options(loaded.settings, _options(loaded.settings, host=host, model=model,
                                                                   listing_budget=listing_budget))
    credentials = runs_mod.credentials_from_env({})
    prices = runs_mod.prices_mod.load(settings)
    the_host = runs_mod.make_host(settings.run.host, loaded.library, settings, credentials, prices, "")
    result = asyncio.run(runs_mod.audit_surface(the_host, loaded.library, settings.run.model))
    if fmt == "json":
        click.echo(result.model_dump_json(indent=2))
    else:
        _print_surface(result, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_FINDINGS if result.error else EXIT_OK)


@main.command("select", short_help="Which cases a tier selects, and why each one.")
@library_option
@config_option
@click.option("--tier", type=click.Choice(["pr", "cadence", "full"]), default="full", show_default=True,
              help="pr: skills changed in base...head and their neighbours; cadence: this period's rotating "
                   "stratified sample; full: every case.")
@click.option("--base", default=None, help="--tier pr: the pull request's base ref (required for pr).")
@click.option("--head", default=None, help="--tier pr: the head ref (default HEAD).")
@click.option("--period", default=None,
              help="--tier cadence: the period key (default [select] period, else this ISO week, e.g. 2026-W48).")
@click.option("--skill", "skills", multiple=True, help="Narrow to the cases of this skill (repeatable).")
@click.option("--case", "cases", multiple=True, help="Narrow to cases whose uid matches this glob (repeatable).")
@click.option("--neighbours", is_flag=True, help="With --skill: the narrowing keeps the skills' neighbours too.")
@click.option("--format", "fmt", type=click.Choice(["json", "text"]), default="json", show_default=True,
              help="json = the selection file `run --selection` reads; text = one line per case with its reason.")
def select_command(library_path: Path, config: Path | None, tier: str, base: str | None, head: str | None,
                   period: str | None, skills: tuple[str, ...], cases: tuple[str, ...], neighbours: bool,
                   fmt: str) -> None:
    """Which cases a tier selects, and why each one (also what `run`/`plan --tier` use)."""
    from runner.plan.select import SelectError, select_tier

    loaded = _load_or_exit(library_path, config)
    chosen = loaded.settings.select
    try:
        selection = select_tier(loaded.library, tier, base=base, head=head, period=period or chosen.period or None,
                                fraction=chosen.cadence_fraction, skills=list(skills), case_patterns=list(cases),
                                with_neighbours=neighbours, max_full_cases=chosen.max_full_cases,
                                settings_paths=chosen.settings_paths)
    except SelectError as exc:
        _fail_usage(str(exc))
        return
    if selection.unknown_skills:
        _fail_usage(f"no such skill(s) in the library: {', '.join(selection.unknown_skills)}")
    if fmt == "json":
        click.echo(selection.model_dump_json(indent=2))
    else:
        click.echo(f"tier {selection.tier}: {len(selection.cases)} case(s); {selection.note}")
        for case in selection.cases:
            click.echo(f"  {case.uid} — {case.why}")
    sys.exit(EXIT_OK)


@main.command(short_help="The cost arithmetic of a run, before anything is spent.", epilog=PLAN_ENVIRONMENT)
@library_option
@config_option
@_run_options
@_floor_options
@_untrusted_option
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None, callback=_writable_folder,
              help="Write plan.json here.")
@click.option("--no-surface", is_flag=True, help="Skip the surface audit: the first request is then estimated from the census's listing and the host's "
                   "measured prompt size, and the plan says so.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text = the plan for a person; json = plan.json as `run` would write it.")
def plan(library_path: Path, config: Path | None, out: Path | None, no_surface: bool, fmt: str,
         no_library_validator: bool = False, strict: bool = False, validator_sandbox: str = "none",
         untrusted_settings: bool = False, **run_options: object) -> None:
    """The cost arithmetic of a run, before anything is spent: exactly the cases `run` would run."""
    from runner.execute import run as runs_mod
    from runner.plan.select import SelectError

    loaded = _load_or_exit(library_path, config)
    if untrusted_settings:
        _refuse_settings_executables(loaded)
    options = _options(loaded.settings, **run_options)
    gate = _floor_gate(loaded, run_library_validator=not no_library_validator, strict=strict,
                       validator_sandbox=validator_sandbox)
    _stop_on_floor(gate, "nothing would run", fmt)
    try:
        prepared = runs_mod.prepare(loaded.library, loaded.settings, options,
                                    runs_mod.credentials_from_env(os.environ), audit=not no_surface, floor=gate)
    except (runs_mod.quarantine_mod.QuarantineError, ValueError, SelectError) as exc:
        _fail_usage(str(exc))
        return
    if prepared.unknown_skills:
        _fail_usage(f"no such skill(s) in the library: {', '.join(prepared.unknown_skills)}")
    if out:
        runs_mod.write_plan(runs_mod.RunDir(out), prepared)
    if fmt == "json":
        click.echo(prepared.plan.model_dump_json(indent=2))
    else:
        console = Console(soft_wrap=True, highlight=False)
        _print_selection_note(prepared, console)
        _print_plan(prepared.plan, console)
    sys.exit(EXIT_OK)


@main.command(short_help="Validate, plan, execute the evals, write results.json.", epilog=RUN_ENVIRONMENT)
@library_option
@config_option
@_run_options
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), default=None, callback=_writable_folder,
              help="Run folder (default runs/<timestamp>).")
@_floor_options
@_untrusted_option
@click.option("--container", is_flag=True,
              help="Build the runner image from the Dockerfile and run inside it: the repository mounted read-only, "
                   "no network (the Messages API only, through a proxy on this machine that holds the API key: "
                   "the key never enters the container), a read-only root filesystem, and a time limit from the "
                   "plan.")
@click.option("--base-image", default=None, envvar="SKILL_EVALS_BASE_IMAGE",
              help="With --container: the image to build from (default: the Dockerfile's, python:3.12-slim).")
@click.option("--resume", "resume_dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              callback=_writable_folder,
              help="Continue this run folder's plan; finished attempts are not run again. The plan keeps its "
                   "selection, host, model, N, k and bounds; only --max-usd may be given (the cap of the whole "
                   "folder, its spend so far included).")
@click.option("--batch", is_flag=True,
              help="Send the model turns of api-host sessions and the judge calls through the Message Batches API "
                   "(half the price; results can take up to 24 hours). Batch ids are recorded in the run folder, "
                   "so --resume polls the same batches instead of paying again.")
@click.option("--batch-poll", "batch_poll_s", type=POLL_SECONDS, default=30.0, show_default=True,
              help="With --batch: seconds between polls of a batch's status.")
def run(library_path: Path, config: Path | None, out: Path | None, resume_dir: Path | None, container: bool,
        base_image: str | None, no_library_validator: bool, strict: bool = False, batch: bool = False,
        batch_poll_s: float = 30.0, validator_sandbox: str = "none", untrusted_settings: bool = False,
        **run_options: object) -> None:
    """Validate, audit the surface, plan, execute, and write results.json."""
    if resume_dir:
        _refuse_plan_options_on_resume(click.get_current_context(), resume_dir)
        if (resume_dir / "plan.json").exists():
            _read_plan(resume_dir)  # unreadable: one line that names the file, before the floor runs
    if container:
        _run_in_container(library_path, config, out, resume_dir, base_image)
        return
    from runner.execute import run as runs_mod
    from runner.execute.progress import reporter
    from runner.plan.select import SelectError

    console = Console(soft_wrap=True, highlight=False, stderr=False)
    loaded = _load_or_exit(library_path, config)
    if untrusted_settings:
        _refuse_settings_executables(loaded)
    options = None if resume_dir else _options(loaded.settings, **run_options, batch=batch)
    if not resume_dir and out is None and (problem := files_mod.folder_problem(Path("runs"))):
        _fail_usage(f"the default run folder (runs/<time>, no --out) cannot be used: {problem}; give --out a folder "
                    "that can be written")
    floor_findings = _floor(loaded, not no_library_validator, validator_sandbox=validator_sandbox)
    gate = floor_mod.gate(floor_findings, loaded.library, strict)
    _stop_on_floor(gate, "nothing was run")
    console.print(_floor_line(floor_findings, gate, no_library_validator), markup=False)
    credentials = runs_mod.credentials_from_env(os.environ)
    try:
        if resume_dir:
            # Same library content as planned (prepare_resume checks the hash), so the plan's holds still apply.
            rundir = runs_mod.RunDir(resume_dir)
            max_usd = run_options.get("max_usd")
            prepared = runs_mod.prepare_resume(rundir, loaded.library, loaded.settings, credentials,
                                               max_usd=max_usd if isinstance(max_usd, float) else None)
        else:
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
            rundir = runs_mod.RunDir(out or Path("runs") / stamp)
            # With the run folder, prepare locks it (a second process on it is refused) before the host exists.
            assert options is not None
            prepared = runs_mod.prepare(loaded.library, loaded.settings, options,
                                        credentials, audit=True, floor=gate, rundir=rundir)
            if prepared.unknown_skills:
                _fail_usage(f"no such skill(s) in the library: {', '.join(prepared.unknown_skills)}")
            runs_mod.write_plan(rundir, prepared)
    except (runs_mod.ResumeError, runs_mod.quarantine_mod.QuarantineError, ValueError, SelectError) as exc:
        _fail_usage(str(exc))
        return
    _print_selection_note(prepared, console)
    _print_plan(prepared.plan, console)
    if resume_dir and run_options.get("max_usd") is not None:
        console.print(f"Resume: cap ${prepared.plan.cap_usd:.2f} for the whole run folder (the plan's was "
                      f"${runs_mod.load_plan(rundir).cap_usd:.2f}); the spend already recorded counts against it")
    if prepared.plan.unrun_all == "no-credentials":
        console.print(runs_mod.HOW_TO_GET_RESULTS)
    with reporter(prepared.plan.estimate.sessions_max, prepared.plan.cap_usd, runs_mod.is_terminal()) as progress:
        batch = batch or prepared.plan.batch  # a batched run resumes batched
        if batch:
            from runner.execute import batch as batch_mod
            results = batch_mod.execute_batched(prepared, rundir, credentials, progress, batch_poll_s)
        else:
            results = runs_mod.execute(prepared, rundir, progress)
    _print_results(results, rundir.path, console)
    if batch:
        from runner.execute import batch as batch_mod
        console.print(batch_mod.summary(rundir.path / batch_mod.BATCHES), markup=False)
    sys.exit(130 if results.stop_reason == "cancelled" else EXIT_OK)


CONTAINER_TAG = "skill-evals-runner:local"


def _forwarded_args(drop: set[str]) -> list[str]:
    """The options this `run` was given, to repeat them inside the container (paths are remapped)."""
    ctx = click.get_current_context()
    args: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in drop:
            continue
        value = ctx.params.get(param.name)
        if value is None or value is False or value == ():
            continue
        flag = param.opts[0]
        if param.is_flag:
            args.append(flag)
        elif isinstance(value, tuple):
            for item in value:
                args += [flag, str(item)]
        else:
            args += [flag, str(value)]
    return args


def _run_in_container(library_path: Path, config: Path | None, out: Path | None, resume_dir: Path | None,
                      base_image: str | None) -> None:
    import docker

    from runner.container import launch as container_mod

    loaded = _load_or_exit(library_path, config)
    root = loaded.root
    repo_library = "/repo/" + (library_path.resolve().relative_to(root).as_posix() if
                               library_path.resolve() != root else "")
    target = resume_dir or out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    drop = {"library_path", "config", "out", "resume_dir", "container", "base_image"}
    params = click.get_current_context().params
    if params.get("untrusted_settings"):
        _refuse_settings_executables(loaded)
    # The container has no Docker: a sandboxed validator runs from here, in its own container, before the run's
    # container (the one the API reaches) starts; in there it is not run again.
    drop.add("validator_sandbox")
    validated_here = params.get("validator_sandbox") == "container" and not params.get("no_library_validator")
    if validated_here:
        _stop_on_floor(floor_mod.gate(_validator_findings(loaded, None, "container"), loaded.library),
                       "nothing was run")
    extra: list[str] = []
    if not resume_dir and params.get("tier") in ("pr", "cadence") and not params.get("selection_file"):
        # git runs here, on the host: the image has no git and the mount is read-only. The container gets
        # the selection as a file in its output folder.
        from runner.plan.select import SelectError, select_tier
        settings = loaded.settings
        try:
            selection = select_tier(loaded.library, params["tier"], base=params.get("base"), head=params.get("head"),
                                    period=params.get("period") or settings.select.period or None,
                                    fraction=settings.select.cadence_fraction, skills=list(params.get("skills") or ()),
                                    case_patterns=list(params.get("cases") or ()),
                                    with_neighbours=bool(params.get("neighbours")),
                                    max_full_cases=settings.select.max_full_cases,
                                    settings_paths=settings.select.settings_paths)
        except SelectError as exc:
            _fail_usage(str(exc))
            return
        target.mkdir(parents=True, exist_ok=True)
        (target / "selection.json").write_text(selection.model_dump_json(indent=2), encoding="utf-8")
        extra = ["--selection", "/out/selection.json"]
        drop |= {"base", "head", "period", "skills", "cases", "neighbours"}
    args = ["run", "--library", repo_library.rstrip("/") or "/repo", "--out" if not resume_dir else "--resume",
            "/out", *_forwarded_args(drop), *extra]
    if validated_here:
        args.append("--no-library-validator")
    if config:
        try:
            args += ["--config", "/repo/" + config.resolve().relative_to(root).as_posix()]
        except ValueError:
            _fail_usage("with --container, --config must be inside the repository (it is mounted at /repo)")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the daemon is the same usage error
        _fail_usage(f"--container needs a Docker daemon: {exc}")
        return
    # The image is built from skill-evals' own source (the action's checkout, or this editable install).
    from runner.container.sandbox import source_root

    source = source_root()
    # The time limit: a planning allowance, then the bound of the plan the container writes (container.json and
    # stderr say which and why).
    deadline = container_mod.PlanDeadline.for_run(loaded.settings, target / "plan.json", resumed=bool(resume_dir))

    told: list[container_mod.Deadline] = []

    def deadline_set(found: container_mod.Deadline) -> None:
        told.append(found)
        click.echo(f"skill-evals: container deadline {found.seconds:.0f} s ({found.basis})", err=True)

    try:
        image = container_mod.given_image(client, os.environ) or container_mod.ensure_image(
            client, source, base_image or "python:3.12-slim", CONTAINER_TAG)
        outcome = container_mod.run_in_container(
            client, image, root, target, args, container_mod.container_env(os.environ), deadline=deadline,
            on_deadline=deadline_set)
    except container_mod.ContainerError as exc:
        _fail_usage(str(exc))
        return
    # The run inside says /out and /repo: the user reads the folders of this machine.
    click.echo(container_mod.host_paths(outcome.stdout, target, root), nl=False)
    click.echo(container_mod.host_paths(outcome.stderr, target, root), nl=False, err=True)
    if outcome.deadline is not None and not told:  # the run ended before the plan was first looked for
        deadline_set(outcome.deadline)
    if outcome.timed_out and outcome.deadline is not None:
        click.echo(f"skill-evals: the container was stopped at its deadline, {outcome.deadline.seconds:.0f} s "
                   f"({outcome.deadline.basis}); the run folder can be continued with --resume", err=True)
    proxy = outcome.api_proxy or {}
    if proxy.get("refused_total"):
        click.echo(f"skill-evals: the API proxy refused {proxy['refused_total']} request(s) from the container, e.g. "
                   f"{', '.join(proxy['refused'][:5])} (only the Messages API endpoints skill-evals uses are "
                   "forwarded; container.json lists them)", err=True)
    sys.exit(outcome.exit_code)


@main.command(short_help="Post the check run, the PR comment and the job summary.", epilog=PUBLISH_ENVIRONMENT)
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False), required=False)
@click.option("--mode", type=click.Choice(["advisory", "required"]), default="advisory", show_default=True,
              help="required: a failing run fails the check (a human's choice, after the stability record).")
@click.option("--no-comment", is_flag=True, help="Do not create or edit the PR comment.")
@click.option("--start", is_flag=True,
              help="Only create the check run in progress (no RUN_DIR), with the workflow run as its details; prints "
                   "its check_run_id, for the final publish's --check-run-id.")
@click.option("--check-run-id", type=click.IntRange(min=1), default=None,
              help="Complete this check run (the one --start created) instead of looking it up by commit. With no "
                   "results.json in RUN_DIR, it is completed as 'no results' rather than left in progress.")
@click.option("--library", "library_path", type=click.Path(path_type=Path), default=None,
              help="The library the run read: annotation paths are made relative to its repository's root "
                   "(default: the library root plan.json names, when it exists here).")
@click.option("--link", "links", multiple=True, metavar="LABEL=URL",
              help="A report uploaded elsewhere (e.g. an artifact's URL), linked from the summary, the comment and "
                   "the job summary. Repeatable.")
def publish(run_dir: Path | None, mode: str, no_comment: bool, start: bool = False, check_run_id: int | None = None,
            library_path: Path | None = None, links: tuple[str, ...] = ()) -> None:
    """Post the check run, the PR comment (edited in place) and the job summary from results.json."""
    from runner.publish import github as github_mod

    ctx = github_mod.Context.from_env(os.environ)
    token = os.environ.get("GITHUB_TOKEN") or None
    if start:
        if run_dir is not None:
            _fail_usage("publish --start takes no RUN_DIR: the run has not written one yet")
        click.echo(github_mod.start(ctx, token).model_dump_json(indent=2))
        sys.exit(EXIT_OK)
    if run_dir is None:
        _fail_usage("publish needs RUN_DIR (or --start)")
        return
    if any("=" not in link for link in links):
        _fail_usage("--link takes LABEL=URL")
    labelled = dict(link.split("=", 1) for link in links)
    results, problem = _results_problem(run_dir)
    if results is None:
        if check_run_id is None:
            _fail_usage(problem)
            return
        closed = github_mod.close_without_results(ctx, token, check_run_id, mode)  # type: ignore[arg-type]
        click.echo(closed.model_dump_json(indent=2))
        sys.exit(EXIT_FINDINGS if closed.conclusion == "failure" else EXIT_OK)
    prefix, note = github_mod.library_prefix(library_path, run_dir)
    if note:
        ctx.warnings.append(note)
    outcome = github_mod.publish(results, ctx, token, mode, comment=not no_comment,  # type: ignore[arg-type]
                                 check_run_id=check_run_id, path_prefix=prefix, links=labelled)
    click.echo(outcome.model_dump_json(indent=2))
    sys.exit(EXIT_FINDINGS if mode == "required" and outcome.conclusion == "failure" else EXIT_OK)


@main.command("judge", short_help="Judge a finished run again from its stored answers.", epilog=JUDGE_ENVIRONMENT)
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@library_option
@config_option
@click.option("--judge-model", default=None, help="Default: [judge] model.")
@click.option("--max-usd", type=USD, default=None, help="Cap on the judge calls (default [run] max_usd).")
@click.option("--batch", is_flag=True,
              help="Send the judge calls through the Message Batches API "
                   "(half the price; results can take up to 24 hours). Batch ids are recorded in the run folder, "
                   "so `judge` again on the same run polls the same batches instead of paying again.")
@click.option("--batch-poll", "batch_poll_s", type=POLL_SECONDS, default=30.0, show_default=True,
              help="With --batch: seconds between polls of a batch's status.")
def judge_command(run_dir: Path, library_path: Path, config: Path | None, judge_model: str | None,
                  max_usd: float | None, batch: bool = False, batch_poll_s: float = 30.0) -> None:
    """Judge a finished run again from its stored answers (no session), into a new results file."""
    from runner.execute import run as runs_mod
    from runner.judge import rejudge as rejudge_mod

    loaded = _load_or_exit(library_path, config)
    rundir = runs_mod.RunDir(run_dir)
    credentials = runs_mod.credentials_from_env(os.environ)
    if not credentials.api_key:
        _fail_usage("judging needs ANTHROPIC_API_KEY; nothing was judged")
    plan = _read_plan(run_dir)
    if (run_dir / "results.json").exists():
        _read_results(run_dir)  # compared with the new results afterwards: unreadable is refused before any spend
    if plan.library.content_hash != loaded.library.content_hash:
        _fail_usage(f"{run_dir}: the library changed since this run; its assertions would not be the ones judged")
    settings = loaded.settings
    if judge_model:
        settings = settings.model_copy(update={"judge": settings.judge.model_copy(update={"model": judge_model})})
    prices = runs_mod.prices_mod.load(settings)
    made, unavailable = runs_mod.make_judge(settings, credentials, prices, loaded.root)
    if made is None:
        _fail_usage(f"the judge is not available ({unavailable})")
        return
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
    _print_results(results, target.path, console)
    console.print(f"Re-judged with {the_judge.settings.model} (prompt {the_judge.version}): {len(changes)} change(s); "
                  f"see {target.path / 'changes.json'}")
    for change in changes[:20]:
        console.print(f"  {change.uid} {change.what}: {change.before} → {change.after}", markup=False)
    sys.exit(EXIT_OK)


RESULTS_WHAT = "a results file of this runner"


def _results_problem(folder: Path) -> tuple["results_mod.Results | None", str]:
    """A run folder's results.json, or why not in one line that names the file: where the JSON breaks (line and
    column) or the first key that is wrong, never pydantic's dump."""
    from runner.results import modelfile
    from runner.results.build import Results

    path = folder / "results.json"
    if not path.exists():
        return None, f"{folder}: no results.json (is this a finished run folder?)"
    try:
        return modelfile.read(path, Results, RESULTS_WHAT), ""
    except modelfile.Unreadable as exc:
        return None, str(exc)


def _read_results(folder: Path) -> "results_mod.Results":
    results, problem = _results_problem(folder)
    if results is None:
        _fail_usage(problem)
        raise AssertionError("unreachable: _fail_usage exits")
    return results


def _read_plan(folder: Path) -> "plan_mod.Plan":
    """A run folder's plan.json, or a usage error in one line that names the file and says why."""
    from runner.plan.build import Plan
    from runner.results import modelfile

    path = folder / "plan.json"
    if not path.exists():
        _fail_usage(f"{folder}: no plan.json (not a run folder)")
    try:
        return modelfile.read(path, Plan, "a plan written by `skill-evals plan` or `run`")
    except modelfile.Unreadable as exc:
        _fail_usage(str(exc))
        raise AssertionError("unreachable: _fail_usage exits") from None


class _ReportCommand(click.Command):
    """`report RUN_DIR --previous A B C`: --previous takes every folder after it, up to the next option (what the
    README and the nightly workflow write); `--previous A --previous B` is the same. Click options take a fixed
    number of values, so the folders after the first are given to click as repeated --previous."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spread: list[str] = []
        greedy = False
        position = 0
        while position < len(args):
            arg = args[position]
            position += 1
            if arg == "--":  # the end of the options: the rest is arguments, as it is
                spread += args[position - 1:]
                break
            if greedy and not arg.startswith("-"):
                spread += ["--previous", arg]
                continue
            spread.append(arg)
            greedy = arg.startswith("--previous=")
            if arg == "--previous" and position < len(args):
                spread.append(args[position])  # its first folder, taken as click takes it
                position += 1
                greedy = True
        try:
            return super().parse_args(ctx, list(spread))  # click's parser empties the list it is given
        except click.MissingParameter as exc:
            if exc.param is not None and exc.param.name == "run_dir" and any(
                    a == "--previous" or a.startswith("--previous=") for a in spread):
                raise click.UsageError("RUN_DIR is missing: --previous takes every folder after it (up to the next "
                                       "option), so name RUN_DIR first: report RUN_DIR --previous OLDEST ... NEWEST",
                                       ctx) from None
            raise


@main.command(cls=_ReportCommand, short_help="Render results.json: terminal, Markdown, JUnit, HTML, JSON.")
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--format", "fmt", type=click.Choice(["terminal", "markdown", "junit", "html", "json"]),
              default="terminal", show_default=True,
              help="terminal = rich tables; markdown = the PR comment's rollup; junit = JUnit XML; html = one "
                   "self-contained page; json = results.json as it is.")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None, callback=_writable_file,
              help="Write the report to this file instead of standard output.")
@click.option("--previous", "previous", multiple=True, metavar="DIR...",
              type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Earlier run folders, oldest first, after RUN_DIR: `--previous A B` or `--previous A --previous "
                   "B`. Adds state changes, flips, quarantine candidates and the stability record.")
@click.option("--limit", type=AT_LEAST_ONE, default=65_000, show_default=True,
              help="Markdown: fit this many characters (GitHub comments take 65,535).")
def report(run_dir: Path, fmt: str, out: Path | None, previous: tuple[Path, ...], limit: int) -> None:
    """Render a finished run from its results.json: terminal, Markdown, JUnit XML, HTML or JSON."""
    read = _read_results
    results = read(run_dir)
    history = None
    if previous:
        from runner.results import history as history_mod
        # Labelled by folder: two runs that finished in the same second stay apart.
        history = history_mod.compare(results, [read(p) for p in previous], labels=[str(p) for p in previous],
                                      current_label=str(run_dir))
    if fmt == "terminal" and out is None:
        from runner.report import terminal
        console = Console(soft_wrap=True, highlight=False)
        terminal.render(results, console)
        if history is not None:
            console.print(history_mod.render_markdown(history), markup=False)
        sys.exit(EXIT_OK)
    if fmt == "markdown" or fmt == "terminal":
        from runner.report import markdown
        extra = "\n\n" + history_mod.render_markdown(history) if history is not None else ""
        try:
            text = markdown.render(results, limit=limit - len(extra)) + extra
        except ValueError as exc:  # not even the counts fit: never drop them
            _fail_usage(f"--limit {limit} is too small for this report's counts: {exc}")
            return
    elif fmt == "junit":
        from runner.report import junit
        text = junit.render(results)
    elif fmt == "html":
        from runner.report import html
        text = html.render(results, run_dir)
    else:
        text = results.model_dump_json(indent=2)
    if out:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}")
    else:
        click.echo(text)
    sys.exit(EXIT_OK)


@main.command(short_help="Combine the shards of one plan into one run folder.")
@click.argument("shards", nargs=-1, required=True, type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.option("--out", type=click.Path(path_type=Path, file_okay=False), required=True, callback=_writable_folder,
              help="The merged run folder to write (attempts, transcripts and a recomputed results.json).")
def merge(shards: tuple[Path, ...], out: Path) -> None:
    """Combine the shards of one plan into one run folder and recompute every rollup."""
    from runner.results import merge as merge_mod

    try:
        results = merge_mod.merge_dirs(list(shards), out)
    except merge_mod.MergeError as exc:
        _fail_usage(str(exc))
        return
    _print_results(results, out, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_OK)


@main.command("calibrate-judge", short_help="Measure the judge on labelled answers against thresholds.",
              epilog=JUDGE_ENVIRONMENT)
@click.argument("labels", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@library_option
@config_option
@click.option("--judge-model", default=None, help="Default: [judge] model.")
@click.option("--no-record", is_flag=True, help="Do not append the record to .skill-evals/judge-calibration.json.")
def calibrate_judge(labels: Path, library_path: Path, config: Path | None, judge_model: str | None,
                    no_record: bool) -> None:
    """Run the judge on labelled answers: agreement, false PASS, false FAIL, JUDGE-ERROR against thresholds."""
    from runner.execute import run as runs_mod
    from runner.judge import calibration

    try:
        root, _ = find_root(library_path)
    except LibraryError as exc:
        _fail_usage(str(exc))
        return
    settings, found = settings_mod.load(config or root / settings_mod.SETTINGS_FILE, root)
    if findings_mod.has_errors(found):
        click.echo(findings_mod.render_text(found))
        sys.exit(EXIT_USAGE)
    if judge_model:
        settings = settings.model_copy(update={"judge": settings.judge.model_copy(update={"model": judge_model})})
    try:
        items = calibration.load_labels(labels)
    except calibration.LabelsError as exc:
        _fail_usage(str(exc))
        return
    credentials = runs_mod.credentials_from_env(os.environ)
    if not credentials.api_key:
        _fail_usage("calibration needs ANTHROPIC_API_KEY; nothing was judged")
    settings = settings.model_copy(update={"judge": settings.judge.model_copy(update={"require_calibration": False})})
    the_judge, unavailable = runs_mod.make_judge(settings, credentials, runs_mod.prices_mod.load(settings), root)
    if the_judge is None:
        _fail_usage(f"the judge is not available ({unavailable})")
        return
    record = calibration.calibrate(the_judge, items, str(labels), settings.judge.calibration)
    console = Console(soft_wrap=True, highlight=False)
    console.print(f"Judge {record.model} (prompt {record.prompt_version}) on {record.items} labelled item(s): "
                  f"agreement {record.agreement}, false PASS {record.false_pass_rate}, false FAIL "
                  f"{record.false_fail_rate}, JUDGE-ERROR {record.judge_error_rate}; cost ${record.cost_usd:.4f}")
    console.print("PASSED the thresholds" if record.passed else "FAILED: " + "; ".join(record.failures))
    if not no_record:
        console.print(f"Recorded in {calibration.append_record(root, record)}")
    sys.exit(EXIT_OK if record.passed else EXIT_FINDINGS)


@main.command(short_help="Calibrate tier-2 probes by the seed-000 protocol.", epilog=CALIBRATE_ENVIRONMENT)
@click.argument("probes", nargs=-1)
@library_option
@config_option
@click.option("--all", "all_probes", is_flag=True, help="Every probe of the library.")
@click.option("--status", "status_only", is_flag=True, help="Show each probe's calibration state; start nothing.")
@click.option("--host", type=click.Choice(["claude-code", "api"]), default=None,
              help="Where the arms' sessions run: claude-code or api (the approximation). Default [run] host.")
@click.option("--model", default=None, help="The model of the arms' sessions (default [run] model).")
@click.option("--judge-model", default=None, help="Default: [judge] model.")
@click.option("--explicit/--routed", "explicit", default=None,
              help="Treatment prompt starts with /<skill> (the discipline apart from routing), or the skill must be "
                   "chosen by the agent. Default: [probes] explicit_invocation.")
@click.option("--max-usd", type=USD, default=None, help="Hard cap on this command's spend.")
@click.option("--concurrency", type=AT_LEAST_ONE, default=None,
              help="Sessions at once, at most (default [run] concurrency, 4).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True,
              help="text = a table per probe; json = the calibration records (or statuses with --status).")
@_sandbox_option
def calibrate(probes: tuple[str, ...], library_path: Path, config: Path | None, all_probes: bool, status_only: bool,
              host: str | None, model: str | None, judge_model: str | None, explicit: bool | None,
              max_usd: float | None, concurrency: int | None, fmt: str, validator_sandbox: str = "none") -> None:
    """Calibrate tier-2 probes by the seed-000 protocol (control 2 reps, then treatment 2 reps) and record
    the verdict in calibration.json beside each probe: ceiling, window, floor or inconclusive."""
    from runner.execute import run as runs_mod
    from runner.probes import calibration as pc
    from runner.report import probes as probe_report

    loaded = _load_or_exit(library_path, config)
    library = loaded.library
    if probes:
        chosen, unknown = pc.find_probes(library, list(probes))
    else:
        chosen, unknown = (list(library.probes) if all_probes or status_only else []), []
    if unknown:
        known = ", ".join(p.uid for p in library.probes) or "none"
        _fail_usage(f"no such probe: {', '.join(unknown)} (probes in this library: {known})")
    if not library.probes:
        click.echo(f"No tier-2 probes in {library.skills_dir} (evals/probes/<id>/probe.json beside a skill): "
                   "nothing to calibrate.")
        return
    if not chosen:
        _fail_usage("name the probes to calibrate (uid, id or folder), or --all")
    console = Console(soft_wrap=True, highlight=False)
    if status_only:
        statuses = [pc.status(library, p) for p in chosen]
        probe_report.print_statuses(statuses, console, fmt)
        return
    gate = _floor_gate(loaded, run_library_validator=True, strict=False, validator_sandbox=validator_sandbox)
    _stop_on_floor(gate, "nothing was started")
    # Only the floor errors about the probes chosen here (their skill, or the probe itself) refuse them.
    held = {p.uid: hold for p in chosen if (hold := gate.hold(p.uid, p.skill)) is not None}
    if held:
        for uid, hold in held.items():
            click.echo(f"skill-evals: not calibrated: {uid} is held back by the floor ({hold.reason}): "
                       f"{hold.detail}", err=True)
        chosen = [p for p in chosen if p.uid not in held]
        if not chosen:
            click.echo("skill-evals: the floor failed for every chosen probe (see `skill-evals validate`); "
                       "nothing was started", err=True)
            sys.exit(EXIT_FINDINGS)
    settings, _ = runs_mod.apply_options(loaded.settings, _options(
        loaded.settings, host=host, model=model, max_usd=max_usd, concurrency=concurrency, judge_model=judge_model))
    if explicit is not None:
        settings = settings.model_copy(update={"probes": settings.probes.model_copy(
            update={"explicit_invocation": explicit})})
    run = settings.run
    if runs_mod.kill_switch(settings, os.environ):
        console.print("Kill switch on ([run] disabled or SKILL_EVALS_DISABLED): nothing was started.")
        return
    credentials = runs_mod.credentials_from_env(os.environ)
    if not credentials.api_key:
        _fail_usage("calibration runs live sessions and needs ANTHROPIC_API_KEY; nothing was started")
    prices = runs_mod.prices_mod.load(settings)
    judge, unavailable = runs_mod.make_judge(settings, credentials, prices, loaded.root)
    if judge is None:
        _fail_usage(f"calibration grades the act with the judge, which is not available ({unavailable}); "
                    "nothing was started")
        return
    the_host = runs_mod.make_host(run.host, library, settings, credentials, prices, credentials.api_key or "")
    declaration = pc.declare(settings, the_host.name, judge)
    bounds = pc.session_bounds(library, settings, prices, chosen)
    ledger = runs_mod.Ledger(cap_usd=run.max_usd)
    sessions = asyncio.Semaphore(run.concurrency)
    calibrations, refused = [], []
    for probe in chosen:
        try:
            calibrations.append(pc.Calibration(probe, pc.probe_dir(library, probe), declaration, the_host, judge,
                                               ledger, bounds, sessions))
        except (pc.Refused, pc.CalibrationFileError) as exc:
            refused.append(str(exc))
    for reason in refused:
        click.echo(f"skill-evals: not calibrated: {reason}", err=True)
    records, cancelled = pc.run_all(calibrations) if calibrations else ([], False)
    probe_report.print_records(records, declaration, ledger, console, fmt)
    if cancelled:
        sys.exit(130)
    sys.exit(EXIT_FINDINGS if refused or held or any(r.status != "finished" for r in records) else EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main()
