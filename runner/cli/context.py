"""What every command starts from, made one way: the settings and the library (`load`), the credentials, the
options checked against the settings, the selection of a tier, and the floor with its one way to stop a command.

A command that loaded its settings, built its selection or reported a failed floor by itself would drift from the
others (a settings file read differently, a selection `select` prints but `run --container` does not run); here
there is one of each.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from runner.cli.app import EXIT_FINDINGS, fail_usage
from runner.corpus import findings as findings_mod
from runner.corpus import settings as settings_mod
from runner.corpus.findings import Finding
from runner.corpus.library import Library, find_root, load_library
from runner.floor import gate as floor_mod
from runner.floor import validate as validate_mod

if TYPE_CHECKING:
    from runner.execute import run as runs_mod
    from runner.plan.select import Selection

CONTAINER_TAG = "skill-evals-runner:local"


@dataclass
class SettingsAt:
    root: Path  # the repository root
    file: Path  # the settings file: --config, else .skill-evals.toml at the root (which may not exist)
    settings: settings_mod.Settings
    findings: list[Finding]  # what is wrong with the settings


@dataclass
class Loaded:
    library: Library
    settings: settings_mod.Settings
    findings: list[Finding]
    root: Path


def load_settings(library_path: Path, config: Path | None) -> SettingsAt:
    """The settings of the repository the path is in (LibraryError, a usage error, when it holds no library)."""
    root, _ = find_root(library_path)
    settings_file = config or root / settings_mod.SETTINGS_FILE
    settings, found = settings_mod.load(settings_file, root)
    return SettingsAt(root=root, file=settings_file, settings=settings, findings=found)


def load(library_path: Path, config: Path | None) -> Loaded:
    """Settings, then the corpus, with the findings of both."""
    at = load_settings(library_path, config)
    library, corpus_findings = load_library(library_path, at.settings, at.file if at.file.exists() else None)
    return Loaded(library=library, settings=at.settings, findings=at.findings + corpus_findings, root=at.root)


def credentials(environ: dict[str, str] | None = None) -> runs_mod.Credentials:
    """The API key and endpoint from the environment (or from `environ`: {} for none), for the host and judge."""
    from runner.execute import run as runs_mod
    return runs_mod.credentials_from_env(os.environ if environ is None else environ)


def with_judge_model(settings: settings_mod.Settings, judge_model: str | None) -> settings_mod.Settings:
    """--judge-model over [judge] model."""
    if not judge_model:
        return settings
    return settings.model_copy(update={"judge": settings.judge.model_copy(update={"model": judge_model})})


def run_options(settings: settings_mod.Settings, **kw: object) -> runs_mod.Options:
    """The options of one command, checked against the settings they change (k against N, which may come from
    [tiers.<tier>]): a usage error naming the option, before the floor runs and before anything is started."""
    from runner.execute import run as runs_mod
    try:
        kw["shard"] = runs_mod.parse_shard(kw.get("shard"))  # type: ignore[arg-type]
        options = runs_mod.Options(**kw)  # type: ignore[arg-type]
        runs_mod.apply_options(settings, options)
    except ValueError as exc:
        fail_usage(str(exc))
    return options


def select(library: Library, settings: settings_mod.Settings, tier: str, *, base: str | None, head: str | None,
           period: str | None, skills: Sequence[str], cases: Sequence[str], neighbours: bool) -> Selection:
    """The cases a tier selects, with the settings' [select] knobs (SelectError, a usage error, when it cannot)."""
    from runner.plan.select import select_configured

    return select_configured(library, settings.select, tier, base=base, head=head, period=period, skills=skills,
                             cases=cases, neighbours=neighbours)


def refuse_unknown_skills(unknown: Sequence[str]) -> None:
    if unknown:
        fail_usage(f"no such skill(s) in the library: {', '.join(unknown)}")


def refuse_settings_executables(loaded: Loaded) -> None:
    """--untrusted-settings: a program named by the repository's settings would run with the API key."""
    cli_path = loaded.settings.run.cli_path
    if cli_path:
        shown = cli_path if len(cli_path) <= 80 else cli_path[:77] + "..."
        fail_usage(f"--untrusted-settings: the settings name a program to execute with the API key ([run] cli_path "
                   f"= {shown!r}), and they come from the repository under review, so they are refused. Remove "
                   "[run] cli_path (the CLI bundled with claude-agent-sdk is used), or leave out "
                   "--untrusted-settings for a repository whose every contributor you trust")


# ---- the floor ---------------------------------------------------------------------------------------------------

def validator_findings(loaded: Loaded, validator_command: str | None, validator_sandbox: str) -> list[Finding]:
    """The library's own validator, run where --validator-sandbox says (it is the repository's code)."""
    settings = loaded.settings
    validator = validate_mod.find_library_validator(loaded.root, settings, validator_command)
    execute: validate_mod.Executor = validate_mod.run_on_host
    if validator is not None and validator_sandbox == "container":
        from runner.container import sandbox as sandbox_mod
        try:
            execute = sandbox_mod.open_sandbox(CONTAINER_TAG)
        except sandbox_mod.SandboxUnavailable as exc:
            fail_usage(f"--validator-sandbox container: {exc}; or --validator-sandbox none runs the library's "
                       "validator on this machine, as you: only for a repository whose every contributor you trust")
    return validate_mod.run_library_validator(loaded.root, validator, settings.validator.timeout_s, execute)


def floor(loaded: Loaded, run_library_validator: bool = True, validator_command: str | None = None,
          validator_sandbox: str = "none") -> list[Finding]:
    """The settings' and the corpus's findings, the library's own validator, then our checks: what `validate`
    reports, and what the floor of `plan`, `run` and `calibrate` is made of."""
    results = list(loaded.findings)
    settings = loaded.settings
    if settings.validator.enabled and run_library_validator:
        results += validator_findings(loaded, validator_command, validator_sandbox)
    results += validate_mod.check_library(loaded.library, settings)
    return results


def floor_gate(loaded: Loaded, run_library_validator: bool, strict: bool, validator_sandbox: str = "none"
               ) -> floor_mod.FloorGate:
    """The one way `plan`, `run` and `calibrate` learn what the floor keeps from running."""
    return floor_mod.gate(floor(loaded, run_library_validator, validator_sandbox=validator_sandbox), loaded.library,
                          strict)


def floor_failed(outcome: str, why: str = "", scope: str = "") -> NoReturn:
    """The one way a command ends because the floor failed: what failed, where `validate` lists it, exit 1."""
    reason = f"{why}; " if why else ""
    click.echo(f"skill-evals: the floor failed{scope} ({reason}see `skill-evals validate`); {outcome}", err=True)
    sys.exit(EXIT_FINDINGS)


def stop_on_floor(gate: floor_mod.FloorGate, outcome: str, fmt: str = "text") -> None:
    """Exit 1 when the floor stops everything (a library-level error, or any error with --strict)."""
    if not gate.stops_everything:
        return
    shown = gate.errors()
    click.echo(findings_mod.render_json(shown) if fmt == "json" else findings_mod.render_text(shown))
    floor_failed(outcome, "--strict: every error stops the run" if not gate.library else
                 "a library-level error (the library's validator or the settings) stops every skill")


def floor_line(found: list[Finding], gate: floor_mod.FloorGate, skipped_validator: bool = False) -> str:
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
