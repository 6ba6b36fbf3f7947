"""The options of the commands, each declared once: its name, type, default and checks live here, and a command
that takes it says only what it means there (its help, when that differs).

Every number an option takes is checked while the options are parsed: a value out of range is a usage error that
names the option (exit 2), before anything is loaded, started or spent. Paths the command will write, the library
and a selection file are checked the same way.
"""

from __future__ import annotations

import json
import math
import os
import stat
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

import click
from click.core import ParameterSource

from runner.cli import folders
from runner.core.errors import UsageError
from runner.core.host_traits import HOST_NAMES
from runner.corpus import bounded
from runner.corpus import files as files_mod
from runner.corpus import settings as settings_mod
from runner.corpus.loader import find_root

F = TypeVar("F", bound=Callable[..., Any])  # a command function, which an option decorator returns as is


class Decorator(Protocol):
    def __call__(self, f: F, /) -> F: ...


# ---- option values ---------------------------------------------------------------------------------------------

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


# The parameters that name a run folder a command continues (`run --resume DIR`, `judge DIR`): without --library,
# such a command reads the library that folder's plan recorded, not the current folder's.
RUN_FOLDER_PARAMS = ("resume_dir", "run_dir")
PLAN_MAX_BYTES = 256 * 1024 * 1024


def recorded_library(folder: Path) -> Path:
    """The library `folder`'s plan.json recorded (its root and the skills folder a run was given, joined); a usage
    error naming the file when there is none, or when that folder is gone."""
    path = folder / "plan.json"
    if not path.exists():  # a comparison of hosts (`run --host a,b`): every host's plan records the same library
        path = next(iter(sorted(folder.glob("hosts/*/plan.json"))), path)
    try:
        with os.fdopen(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:  # a FIFO never blocks it
            raw = handle.read(PLAN_MAX_BYTES + 1) if stat.S_ISREG(os.fstat(handle.fileno()).st_mode) else b""
        if not 0 < len(raw) <= PLAN_MAX_BYTES:
            raise ValueError("no plan.json within the size bound")
        recorded = json.loads(raw)["library"]
        root, skills_dir = Path(recorded["root"]), str(recorded.get("skills_dir") or ".")
        whole = recorded.get("read_from") == "root"
    except (OSError, ValueError, KeyError, TypeError, RecursionError, AttributeError):
        raise UsageError(f"{path}: no plan.json that records the library this run folder was planned for; "
                               "give --library") from None
    # The repository the run was given (its own eval files, e.g. a routing set at evals/, are the library's too), or
    # the skills folder it was given; a plan from before says neither: its skills folder.
    library = root if whole else (root / skills_dir if not Path(skills_dir).is_absolute() else Path(skills_dir))
    if not library.exists():
        raise UsageError(f"{path} records the library at {library}, which no longer exists; give --library "
                               "with the library's folder (its content must be the same as when it was planned)")
    return library


def checked_library(ctx: click.Context, param: click.Parameter, value: Path) -> Path:
    # Checked while the options are parsed, before a command body imports the live-execution
    # modules (anthropic, claude_agent_sdk: seconds): a wrong path is refused in a fraction of one
    # (find_root raises LibraryError, a usage error the command group prints).
    if ctx.resilient_parsing:
        return value
    # A default is processed after every option given, so a run folder given on the command line is known here.
    if ctx.get_parameter_source(param.name or "") in (ParameterSource.DEFAULT, ParameterSource.DEFAULT_MAP):
        folder = next((ctx.params[name] for name in RUN_FOLDER_PARAMS if ctx.params.get(name) is not None), None)
        if folder is not None:
            value = recorded_library(Path(folder))
    find_root(value)
    return value


def writable_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A folder the command will write (a run folder, plan.json's folder): one that cannot be made or written is a
    usage error now, not an OSError after the sessions were paid for."""
    if value is not None and not ctx.resilient_parsing and (problem := files_mod.folder_problem(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def new_run_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """A folder a new run (or merge) writes: writable, and holding no run and nothing else (runner.cli.folders)."""
    value = writable_folder(ctx, param, value)
    if value is not None and not ctx.resilient_parsing and (problem := folders.occupied(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def resumable_folder(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--resume DIR: writable, and no other process running on it (refused now, not after the floor)."""
    value = writable_folder(ctx, param, value)
    if value is not None and not ctx.resilient_parsing and (problem := folders.busy(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def writable_file(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    if value is not None and not ctx.resilient_parsing and (problem := files_mod.file_problem(value)):
        raise click.BadParameter(problem, ctx, param)
    return value


def checked_config(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--config FILE: a regular file within the settings' size bound, checked without opening it (a FIFO would block
    the open, /dev/zero would never end); settings.load reads it within the same bounds."""
    if value is not None and not ctx.resilient_parsing:
        try:
            bounded.check(value, bounded.SETTINGS_MAX_BYTES)
        except OSError as exc:
            raise click.BadParameter(f"{value}: {exc.strerror or exc}", ctx, param) from None
    return value


def checked_selection(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--selection FILE: a file `skill-evals select` wrote; anything else is a usage error that says where the JSON
    breaks or which key is wrong (never pydantic's dump), before anything is loaded."""
    if value is not None and not ctx.resilient_parsing:
        from runner.plan.select import Selection
        from runner.results import modelfile
        try:
            modelfile.read(value, Selection, "a selection written by `skill-evals select`",
                           bounded.OPTION_FILE_MAX_BYTES)
        except modelfile.Unreadable as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return value


def checked_previous(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """--previous DIR|FILE: an earlier run's folder or results.json, read now (within the run files' bound): one
    that is not JSON is a usage error that names it, before anything is loaded. Its routing matrix is read again
    when the pr tier selects (runner.plan.confusions)."""
    if value is not None and not ctx.resilient_parsing:
        from runner.plan import confusions
        try:
            confusions.read(value)
        except confusions.ConfusionsError as exc:
            raise click.BadParameter(str(exc), ctx, param) from None
    return value


def stacked(*options: Decorator) -> Decorator:
    """Options in the order --help lists them (decorators apply bottom up)."""
    def apply(f: F) -> F:
        for option in reversed(options):
            f = option(f)
        return f
    return apply


# ---- where: the library, its settings ---------------------------------------------------------------------------

library_option = click.option(
    "--library", "library_path", type=click.Path(path_type=Path), default=Path("."), show_default=True,
    callback=checked_library,
    help="A repository root (any layout: .claude/skills, skills/ with or without categories, a plugin marketplace, "
         "...), a folder of skills, or one skill's folder.")
# exists=True: a settings file that is not there is a usage error, never the defaults in silence (a typo in the
# name would run with the $10 default cap instead of the file's).
config_option = click.option(
    "--config", type=click.Path(path_type=Path, dir_okay=False, exists=True), default=None, callback=checked_config,
    help="Settings file (default: .skill-evals.toml at the repository root); it must exist, a regular file of at most "
         "1 MiB.")

settings_commit_option = click.option(
    "--settings-commit", metavar="REV", default=None,
    help="Read the settings file as commit REV holds it (git), not the working tree's; a commit without one means "
         "the defaults. The action passes a pull request's base commit: the pull request runs under the settings "
         "it would be merged into, and its own take effect after the merge.")


def format_option(choices: Sequence[str], help: str, default: str = "text") -> Decorator:
    return click.option("--format", "fmt", type=click.Choice(list(choices)), default=default, show_default=True,
                        help=help)


# ---- the floor ---------------------------------------------------------------------------------------------------

sandbox_option = click.option(
    "--validator-sandbox", type=click.Choice(["container", "none"]), default="none", show_default=True,
    envvar="SKILL_EVALS_VALIDATOR_SANDBOX",
    help="Where the library's own validator (the repository's code) runs: container = a throwaway container "
         "with no network, no secrets, the repository read-only (needs Docker; what the action uses); none = "
         "on this machine as this user, only for code you trust.")


def no_library_validator_option(help: str) -> Decorator:
    return click.option("--no-library-validator", is_flag=True, help=help)


floor_options = stacked(
    sandbox_option,
    no_library_validator_option(
        "Skip the library's own validator here (run it first, without secrets, as the action's validate step "
        "does: it is repository code and could read this process's environment)."),
    click.option("--strict", is_flag=True,
                 help="All or nothing: any floor error stops the run. Without it an error holds back only what "
                      "it is about (its skill's cases: floor-error; one case: invalid-case); a library-level "
                      "error (the library's validator, the settings) always stops everything."))

untrusted_option = click.option(
    "--untrusted-settings", is_flag=True,
    help="The settings file belongs to the code under review (a pull request can write it): its settings are data, "
         "not control. Keys that would set prices, raise the cap, give sessions tools that are not read-only, name "
         "a program to execute, pass a bound, or switch the validator, the judge or the evals off are refused, "
         "each by name (docs/configuration.md, \"Untrusted settings\"). The action passes it.")


# ---- which cases -------------------------------------------------------------------------------------------------

def tier_option(help: str) -> Decorator:
    return click.option("--tier", type=click.Choice(["pr", "cadence", "full"]), default="full", show_default=True,
                        help=help)


def base_option(help: str) -> Decorator:
    return click.option("--base", default=None, help=help)


head_option = click.option("--head", default=None, help="--tier pr: the head ref (default HEAD).")


def period_option(help: str) -> Decorator:
    return click.option("--period", default=None, help=help)


previous_option = click.option(
    "--previous", type=click.Path(path_type=Path, exists=True), default=None, callback=checked_previous,
    help="--tier pr: an earlier run (its folder or results.json, e.g. the last library-wide `route`) whose routing "
         "matrix the selection follows: a skill whose SKILL.md description changed in base...head brings the routing "
         "cases of every skill that run saw confused with it, both directions, each saying which confusion.")

routing_option = click.option(
    "--routing", is_flag=True,
    help="Only the routing cases (those that name a skill that must fire or stay silent), on the first-turn host "
         "unless --host says otherwise: what `skill-evals route` runs.")


def skill_option(help: str) -> Decorator:
    return click.option("--skill", "skills", multiple=True, help=help)


def case_option(help: str) -> Decorator:
    return click.option("--case", "cases", multiple=True, help=help)


def neighbours_option(help: str) -> Decorator:
    return click.option("--neighbours", is_flag=True, help=help)


# ---- how sessions run and are judged -----------------------------------------------------------------------------

def host_option(help: str) -> Decorator:
    return click.option("--host", type=click.Choice(list(HOST_NAMES)), default=None, help=help)


def checked_hosts(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--host a,b,...: each a registered host, none twice; kept as the text given (normalised), so `run --container`
    repeats it as it is and each command splits it (runner.pipeline.each_host.several)."""
    if value is None or ctx.resilient_parsing:
        return value
    names = [name.strip() for name in value.split(",")]
    unknown = [name for name in names if name not in HOST_NAMES]
    if unknown:
        raise click.BadParameter(f"{', '.join(repr(n) for n in unknown)} is no host: use one or more of "
                                 f"{', '.join(HOST_NAMES)}, separated by commas", ctx, param)
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise click.BadParameter(f"{', '.join(twice)} named twice: each host runs the cases once", ctx, param)
    return ",".join(names)


def hosts_option(help: str) -> Decorator:
    """--host of the commands that plan a run (run, plan, route): one host, or several to compare."""
    return click.option("--host", default=None, metavar="HOST[,HOST...]", callback=checked_hosts,
                        help=help + f" Hosts: {', '.join(HOST_NAMES)}.")


def model_option(help: str) -> Decorator:
    return click.option("--model", default=None, help=help)


judge_model_option = click.option("--judge-model", default=None, help="Default: [judge] model.")


def listing_budget_option(help: str) -> Decorator:
    return click.option("--listing-budget", type=AT_LEAST_ONE, default=None, help=help)


def max_usd_option(help: str) -> Decorator:
    return click.option("--max-usd", type=USD, default=None, help=help)


def concurrency_option(help: str) -> Decorator:
    return click.option("--concurrency", type=AT_LEAST_ONE, default=None, help=help)


def batch_option(help: str) -> Decorator:
    return click.option("--batch", is_flag=True, help=help)


batch_poll_option = click.option(
    "--batch-poll", "batch_poll_s", type=POLL_SECONDS, default=30.0, show_default=True,
    help="With --batch: seconds between polls of a batch's status.")


def out_folder_option(help: str, required: bool = False, new_run: bool = False) -> Decorator:
    """--out FOLDER; `new_run`: the folder a new run (or merge) writes, which may hold no run and nothing else."""
    folder = click.Path(path_type=Path, file_okay=False)
    callback = new_run_folder if new_run else writable_folder
    if required:  # no default at all: click then says the option is missing
        return click.option("--out", type=folder, required=True, callback=callback, help=help)
    return click.option("--out", type=folder, default=None, callback=callback, help=help)


run_options = stacked(
    tier_option("Repeats and quorum come from [tiers.<tier>]."),
    skill_option("Only the cases of this skill (repeatable)."),
    case_option("Only cases whose uid matches this glob (repeatable)."),
    neighbours_option("With --skill: add the skills each names as a neighbour."),
    base_option("--tier pr: the pull request's base ref; the cases of skills changed in base...head and their "
                "neighbours are selected."),
    head_option,
    previous_option,
    period_option("--tier cadence: the period key that picks the rotating slot (default [select] period, else this "
                  "ISO week, e.g. 2026-W48)."),
    hosts_option("claude-code (the real host), first-turn (Claude Code's own first request sent directly for "
                 "activation-only cases, the rest on claude-code; not the replay `judge` uses) or api (an "
                 "approximation). Default from [run] host (claude-code). Several, comma-separated (e.g. "
                 "claude-code,api): the same cases on each host, one after another, each in <out>/hosts/<host>/, "
                 "under one cap, compared in <out>/results.json."),
    model_option("The model every session runs on (default [run] model, claude-sonnet-4-6); its price comes from "
                 "runner/data/prices.json or [prices]."),
    click.option("--repeats", type=REPEATS, default=None, help=f"N (odd, at most {settings_mod.MAX_REPEATS:,})."),
    click.option("--quorum", type=AT_LEAST_ONE, default=None, help="k (> N/2, ≤ N); default the majority of N."),
    max_usd_option("Hard cap on this run's spend (≥ 0). With --resume: the cap of the whole run folder, the spend "
                   "already recorded included."),
    concurrency_option("Sessions at once, at most (default [run] concurrency, 4); halved on a 429 and grown back; "
                       "the cap may allow fewer."),
    click.option("--no-early-stop", "early_stop", flag_value=False, default=None,
                 help="Run every repeat (fixed N) instead of stopping once the quorum is decided."),
    click.option("--verdict", type=click.Choice(["quorum", "sequential"]), default=None,
                 help="quorum: k of N repeats. sequential: rounds of attempts until a sequential test decides, at "
                      "most [sequential] max_repeats, else UNDECIDED (default [tiers.<tier>] verdict, else [run] "
                      "verdict, quorum)."),
    click.option("--baseline", "baseline", flag_value=True, default=None,
                 help="Uplift: every output case (assertions about the answer) also runs a control arm, the same "
                      "session without the skill under test, judged by the same rubric; both arms run every repeat "
                      "(default [tiers.<tier>] baseline, else [run] baseline)."),
    click.option("--max-turns", type=TURNS, default=None,
                 help=f"Model turns per session, 1 to {settings_mod.MAX_TURNS:,} (default [run] max_turns, 6); "
                      "a session cut by it counts only for what is already certain."),
    click.option("--timeout", "timeout_s", type=SESSION_SECONDS, default=None,
                 help="Seconds per session (> 0, at most a day)."),
    listing_budget_option("SLASH_COMMAND_TOOL_CHAR_BUDGET for every session (default: the host's own)."),
    judge_model_option,
    click.option("--no-judge", is_flag=True, default=None,
                 help="Do not judge prose assertions (they stay UNRUN judge-disabled)."),
    click.option("--selection", "selection_file", type=click.Path(path_type=Path, dir_okay=False, exists=True),
                 default=None, callback=checked_selection,
                 help="Use the selection `skill-evals select` wrote (instead of selecting again)."),
    click.option("--quarantine", "quarantine_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                 help="The quarantine list to apply instead of the repository's .skill-evals/quarantine.json. With "
                      "--settings-commit the commit's list is applied: a pull request cannot quarantine the cases it "
                      "breaks."),
    click.option("--shard", default=None,
                 help="i/n: execute every n-th case of the plan, starting at the i-th (same plan for every shard; "
                      "merge the shards with `skill-evals merge`)."),
    click.option("--cache", type=click.Path(path_type=Path, file_okay=False), default=None,
                 help="A result cache folder (default [run] cache): a case whose attempts it holds under the same key "
                      "(the case, what every session is shown, the skills it loads, host and version, model, bounds, "
                      "judge, harness) is taken from it, not run again; the run adds what it decided."),
    click.option("--no-cache", is_flag=True, default=False,
                 help="Use no result cache (run every case), whatever [run] cache says."),
    click.option("--cache-read-only", is_flag=True, default=False,
                 help="Take from the result cache, add nothing to it (a pull request's run: it must not write what "
                      "a later run trusts)."),
    click.option("--cache-label", default="", envvar="SKILL_EVALS_CACHE_LABEL",
                 help="Where this run runs (e.g. the CI run and commit), recorded with the entries it adds and shown "
                      "by the runs that reuse them."))
