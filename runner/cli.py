"""The command line: `skill-evals validate | census` (and `python -m runner`).

Exit codes: 0 no error-level finding, 1 an error-level finding, 2 a usage error or a path that
holds no library. Bad input never produces a traceback: it produces findings.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

import click
from rich.console import Console

from runner import findings as findings_mod
from runner import settings as settings_mod
from runner import validate as validate_mod
from runner.corpus import Library, LibraryError, find_root, load_library
from runner.findings import Finding

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2


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


library_option = click.option(
    "--library", "library_path", type=click.Path(path_type=Path), default=Path("."), show_default=True,
    help="A repository root (holding .claude/skills or skills/) or a skills folder.")
config_option = click.option(
    "--config", type=click.Path(path_type=Path, dir_okay=False), default=None,
    help="Settings file (default: .skill-evals.toml at the repository root).")


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skill-evals")
def main() -> None:
    """Execute the evals of an Agent Skills library, honestly."""


@main.command()
@library_option
@config_option
@click.option("--format", "fmt", type=click.Choice(["text", "json", "github"]), default="text", show_default=True,
              help="github = workflow commands that annotate the files in a pull request.")
@click.option("--validator-command", default=None,
              help="The library's own validator, run first from the repository root (default: "
                   "scripts/validate-skills.py when present, or [validator] command in the settings).")
@click.option("--no-library-validator", is_flag=True, help="Do not run the library's own validator.")
def validate(library_path: Path, config: Path | None, fmt: str, validator_command: str | None,
             no_library_validator: bool) -> None:
    """The floor: the library's own validator, then schemas, frontmatter, references, probes, safety."""
    try:
        root, _ = find_root(library_path)
        settings_file = config or root / settings_mod.SETTINGS_FILE
        settings, found = settings_mod.load(settings_file, root)
        results: list[Finding] = list(found)
        if settings.validator.enabled and not no_library_validator:
            validator = validate_mod.find_library_validator(root, settings, validator_command)
            results += validate_mod.run_library_validator(root, validator, settings.validator.timeout_s)
        library, corpus_findings = load_library(library_path, settings,
                                                settings_file if settings_file.exists() else None)
    except LibraryError as exc:
        _fail_usage(str(exc))
        return
    results += corpus_findings + validate_mod.check_library(library, settings)
    if fmt == "json":
        click.echo(findings_mod.render_json(results, {"library": library.skills_dir,
                                                      "skills": len(library.skills), "cases": len(library.cases)}))
    elif fmt == "github":
        click.echo(findings_mod.render_github(results))
    else:
        click.echo(findings_mod.render_text(results))
        click.echo(f"checked {len(library.skills)} skill(s), {len(library.cases):,} case(s), "
                   f"{len(library.probes)} probe(s) in {library.skills_dir}")
    sys.exit(EXIT_FINDINGS if findings_mod.has_errors(results) else EXIT_OK)


@main.command()
@library_option
@config_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def census(library_path: Path, config: Path | None, fmt: str) -> None:
    """What the eval corpus contains: cases by kind, refusals, assertion classes, listing budget."""
    try:
        loaded, _ = _load(library_path, config)
    except LibraryError as exc:
        _fail_usage(str(exc))
        return
    assert loaded is not None
    from runner import census as census_mod  # imported here: rich costs start-up time `validate` need not pay

    results = loaded.findings + validate_mod.check_library(loaded.library, loaded.settings)
    report = census_mod.compute(loaded.library, loaded.settings, results)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        census_mod.render_text(report, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_OK)


if __name__ == "__main__":  # pragma: no cover
    main()
