"""What every command starts from, made one way: the settings and the library (`load`), the credentials, the
options checked against the settings, the selection of a tier, and the floor with its one way to stop a command.

A command that loaded its settings, built its selection or reported a failed floor by itself would drift from the
others (a settings file read differently, a selection `select` prints but `run --container` does not run); here
there is one of each.
"""

from __future__ import annotations

import fnmatch
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from runner.cli.app import EXIT_FINDINGS, fail_usage
from runner.corpus import committed as committed_mod
from runner.corpus import findings as findings_mod
from runner.corpus import settings as settings_mod
from runner.corpus import trust
from runner.corpus.findings import Finding, display_path
from runner.corpus.library import Library
from runner.corpus.loader import find_root, load_library
from runner.floor import gate as floor_mod
from runner.floor import validate as validate_mod

if TYPE_CHECKING:
    from runner.pipeline import run as runs_mod
    from runner.plan.select import Selection

CONTAINER_TAG = "skill-evals-runner:local"


@dataclass
class SettingsAt:
    root: Path  # the repository root
    file: Path | None  # the settings file read (--config, .skill-evals.toml at the root, a commit's); None: none
    settings: settings_mod.Settings
    findings: list[Finding]  # what is wrong with the settings
    shown: str = settings_mod.SETTINGS_FILE  # how findings and messages name the file
    committed: committed_mod.Committed | None = None  # --settings-commit: the file as that commit holds it


@dataclass
class Loaded:
    library: Library
    settings: settings_mod.Settings
    findings: list[Finding]
    root: Path
    settings_file: Path | None = None  # the settings file read, None when there is none (the defaults)
    settings_shown: str = settings_mod.SETTINGS_FILE
    committed: committed_mod.Committed | None = None  # holds a commit's settings file while this lives
    # --settings-commit: the commit's quarantine list (a file, empty when the commit has none), which `plan` and
    # `run` apply instead of the working tree's; held while this lives.
    quarantine: committed_mod.Committed | None = None

    @property
    def quarantine_file(self) -> Path | None:
        return self.quarantine.path if self.quarantine is not None else None


def load_settings(library_path: Path, config: Path | None, commit: str | None = None) -> SettingsAt:
    """The settings of the repository the path is in (LibraryError, a usage error, when it holds no library):
    --config, else the commit's (--settings-commit), else .skill-evals.toml at the root."""
    root, _ = find_root(library_path)
    if commit is not None:
        if config is not None:
            fail_usage("--config and --settings-commit both name the settings: give one")
        held = committed_mod.read(root, commit)
        settings, found = settings_mod.load(held.path, root)
        at = SettingsAt(root=root, file=held.path, settings=settings, findings=found, shown=held.shown,
                        committed=held)
        return _named(at, at.findings)
    settings_file = config or root / settings_mod.SETTINGS_FILE
    settings, found = settings_mod.load(settings_file, root)
    exists = settings_file.exists()
    return SettingsAt(root=root, file=settings_file if exists else None, settings=settings, findings=found,
                      shown=display_path(settings_file, root) if exists else settings_mod.SETTINGS_FILE)


def _named(at: SettingsAt, found: list[Finding]) -> SettingsAt:
    """A commit's settings are read from a temporary copy: its findings name the file as `REV:path`."""
    if at.file is not None:
        copy = display_path(at.file, at.root)
        for finding in found:
            if finding.file == copy:
                finding.file = at.shown
    return at


def load(library_path: Path, config: Path | None, commit: str | None = None) -> Loaded:
    """Settings, then the corpus, with the findings of both."""
    at = load_settings(library_path, config, commit)
    library, corpus_findings = load_library(library_path, at.settings, at.file)
    _named(at, corpus_findings)
    quarantine = committed_quarantine(at.root, commit) if commit is not None else None
    return Loaded(library=library, settings=at.settings, findings=at.findings + corpus_findings, root=at.root,
                  settings_file=at.file, settings_shown=at.shown, committed=at.committed, quarantine=quarantine)


def refuse_no_skills(loaded: Loaded, path: Path) -> None:
    """A command that plans (select, plan, run) on a library with no skill: nothing could ever run, which an empty
    folder already says (runner.corpus.layout); an empty .claude/skills says the same, not a plan of nothing."""
    if not loaded.library.skills:
        # The settings or the layout may say why (a root that is no usable path): those errors come first.
        errors = [f for f in loaded.findings if f.level is findings_mod.Level.ERROR]
        if errors:
            click.echo(findings_mod.render_text(errors), err=True)
        fail_usage(f"{path}: no skills found (no folder of it holds a SKILL.md the host would read); "
                   "`skill-evals validate` lists what was found instead")


def committed_quarantine(root: Path, commit: str) -> committed_mod.Committed:
    """The quarantine list as the commit holds it; a commit without one quarantines nothing (an empty list)."""
    from runner.corpus import bounded
    from runner.plan.quarantine import QUARANTINE_FILE

    held = committed_mod.read_file(root, commit, QUARANTINE_FILE.as_posix(), bounded.OPTION_FILE_MAX_BYTES)
    if held.path is None:
        held.folder = tempfile.TemporaryDirectory(prefix="skill-evals-quarantine-")
        held.path = Path(held.folder.name) / QUARANTINE_FILE.name
        held.path.write_text("[]\n", encoding="utf-8")
    return held


def credentials(environ: dict[str, str] | None = None) -> runs_mod.Credentials:
    """The API key and endpoint from the environment (or from `environ`: {} for none), for the host and judge."""
    from runner.pipeline import run as runs_mod
    return runs_mod.credentials_from_env(os.environ if environ is None else environ)


def with_judge_model(settings: settings_mod.Settings, judge_model: str | None) -> settings_mod.Settings:
    """--judge-model over [judge] model."""
    if not judge_model:
        return settings
    return settings.model_copy(update={"judge": settings.judge.model_copy(update={"model": judge_model})})


def run_options(settings: settings_mod.Settings, loaded: Loaded | None = None, **kw: object) -> runs_mod.Options:
    """The options of one command, checked against the settings they change (k against N, which may come from
    [tiers.<tier>]): a usage error naming the option, before the floor runs and before anything is started.
    `loaded`: with --settings-commit, its commit's quarantine list applies unless --quarantine names another."""
    from runner.pipeline import run as runs_mod
    if loaded is not None and kw.get("quarantine_file") is None and loaded.quarantine_file is not None:
        kw["quarantine_file"] = loaded.quarantine_file
    try:
        kw["shard"] = runs_mod.parse_shard(kw.get("shard"))  # type: ignore[arg-type]
        options = runs_mod.Options(**kw)  # type: ignore[arg-type]
        runs_mod.apply_options(settings, options)
    except ValueError as exc:
        fail_usage(str(exc))
    if options.tier == "pr" and not options.base and options.selection_file is None:
        fail_usage("--tier pr needs --base REF (the pull request's base, e.g. origin/main)")
    if loaded is not None:
        refuse_unknown_selection(loaded.library, options.skills, options.cases)
    return options


def routing_sweep(run_options: dict[str, object]) -> None:
    """What makes a run the routing sweep (`route`, `plan --routing`): only the routing cases, on the first-turn host
    unless --host names another. Nothing else changes: the same plan, cap and reports as `run`."""
    from runner.core.host_traits import ROUTE_HOST

    run_options["routing"] = True
    if run_options.get("host") is None:
        run_options["host"] = ROUTE_HOST


def refuse_unknown_selection(library: Library, skills: Sequence[str], cases: Sequence[str]) -> None:
    """--skill names that are no skill of the library, and --case globs that match no case of it: typos, refused
    before the floor (a plan of 0 cases would say nothing about why)."""
    refuse_unknown_skills([name for name in skills if name not in library.skills])
    unmatched = [pattern for pattern in cases if not any(fnmatch.fnmatchcase(c.uid, pattern) for c in library.cases)]
    if unmatched:
        example = f", e.g. {library.cases[0].uid}" if library.cases else ""
        fail_usage(f"--case {', '.join(unmatched)}: matches no case of the library (a case's uid is "
                   f"<skill>/<source>/<id>{example}; `skill-evals census --format json` lists them)")


def select(library: Library, settings: settings_mod.Settings, tier: str, *, base: str | None, head: str | None,
           period: str | None, skills: Sequence[str], cases: Sequence[str], neighbours: bool,
           previous: Path | None = None, routing: bool = False) -> Selection:
    """The cases a tier selects, with the settings' [select] knobs (SelectError, a usage error, when it cannot)."""
    from runner.plan.select import select_configured

    return select_configured(library, settings.select, tier, base=base, head=head, period=period, skills=skills,
                             cases=cases, neighbours=neighbours, previous=previous, routing=routing)


def refuse_unknown_skills(unknown: Sequence[str]) -> None:
    if unknown:
        fail_usage(f"no such skill(s) in the library: {', '.join(unknown)}")


def refuse_untrusted_settings(loaded: Loaded, cap_usd: float | None = trust.RUNNER_CAP_USD) -> None:
    """--untrusted-settings: the settings come from the repository under review, so they are data, not control
    (runner.corpus.trust.POLICY). Every key they set that the policy refuses is named, in one line, exit 2, before
    anything is started. `cap_usd`: the cap this command was given (None: not known here, [run] max_usd unchecked)."""
    if loaded.settings_file is None:
        return
    refused = trust.check(loaded.settings, trust.Bounds(root=loaded.root, cap_usd=cap_usd),
                          trust.settings_text(loaded.settings_file))
    if refused:
        fail_usage(f"--untrusted-settings: {loaded.settings_shown} sets keys the repository under review may not set: "
                   + "; ".join(refusal.shown() for refusal in refused)
                   + ". Remove them (docs/configuration.md, \"Untrusted settings\", says what a repository may set), "
                     "or leave out --untrusted-settings for a repository whose every contributor you trust")


def untrusted_cap(loaded: Loaded, max_usd: float | None) -> float:
    """--untrusted-settings: the keys refused first; then the cap: --max-usd, else the runner's default, lowered
    by the repository's [run] max_usd (never raised: a higher one was refused)."""
    cap = trust.RUNNER_CAP_USD if max_usd is None else max_usd
    refuse_untrusted_settings(loaded, cap)
    return trust.effective_cap(loaded.settings, cap)


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


def validator_disabled(loaded: Loaded, validator_command: str | None) -> Finding:
    """[validator] enabled = false (trusted settings: --untrusted-settings refuses it): said where it is set."""
    file = loaded.settings_file
    line = (trust.locate(trust.settings_text(file), ("validator", "enabled")) if file is not None else None) or 1
    validator = validate_mod.find_library_validator(loaded.root, loaded.settings, validator_command)
    return validate_mod.validator_disabled(loaded.settings_shown, line, validator)


def floor(loaded: Loaded, run_library_validator: bool = True, validator_command: str | None = None,
          validator_sandbox: str = "none") -> list[Finding]:
    """The settings' and the corpus's findings, the library's own validator, then our checks: what `validate`
    reports, and what the floor of `plan`, `run` and `calibrate` is made of."""
    results = list(loaded.findings)
    settings = loaded.settings
    if not settings.validator.enabled:
        results.append(validator_disabled(loaded, validator_command))
    elif run_library_validator:
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
            + "".join(f"; {f.location()}: [{f.rule}] {f.message}" for f in gate.announced)
            + ("; the library's validator was not run here (--no-library-validator)" if skipped_validator
               and not gate.announced else "")
            + ("; `skill-evals validate` lists them" if any(c.values()) else ""))
