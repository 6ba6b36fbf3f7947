"""`validate`, `census` and `surface`: what the library is, checked and counted, before any model is called
(no key, no spend)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import click
from rich.console import Console

from runner.cli import context, options
from runner.cli.app import EXIT_FINDINGS, EXIT_OK
from runner.cli.environment import VALIDATE_ENVIRONMENT
from runner.cli.printing import print_surface
from runner.corpus import findings as findings_mod
from runner.floor import gate as floor_mod
from runner.floor import validate as validate_mod


@click.command(short_help="The floor: the library's own validator, then our checks.", epilog=VALIDATE_ENVIRONMENT)
@options.library_option
@options.config_option
@options.settings_commit_option
@options.format_option(["text", "json", "github"], "github = workflow commands that annotate the files in a pull "
                                                   "request.")
@click.option("--validator-command", default=None,
              help="The library's own validator, run first from the repository root (default: "
                   "scripts/validate-skills.py when present, or [validator] command in the settings).")
@options.no_library_validator_option("Do not run the library's own validator.")
@options.sandbox_option
@click.option("--floor-summary", type=click.Path(path_type=Path, dir_okay=False), default=None,
              callback=options.writable_file,
              help="Also write, as JSON, what the errors would keep `run` from running: `scope` none | skills | "
                   "library, the skills held back and the cases found invalid (the action runs the evals of what "
                   "the floor does not hold back).")
@options.untrusted_option
def validate(library_path: Path, config: Path | None, fmt: str, validator_command: str | None,
             no_library_validator: bool, validator_sandbox: str = "none", floor_summary: Path | None = None,
             untrusted_settings: bool = False, settings_commit: str | None = None) -> None:
    """The floor: the library's own validator, then schemas, frontmatter, references, probes, safety."""
    loaded = context.load(library_path, config, settings_commit)
    if untrusted_settings:  # every key but [run] max_usd, which `run` and `plan` hold against the cap they get
        context.refuse_untrusted_settings(loaded, None)
    library = loaded.library
    results = context.floor(loaded, run_library_validator=not no_library_validator,
                            validator_command=validator_command, validator_sandbox=validator_sandbox)
    if floor_summary is not None:
        floor_summary.write_text(floor_mod.summary(floor_mod.gate(results, library)).model_dump_json(indent=2),
                                 encoding="utf-8")
    if fmt == "json":
        layout = library.layout
        click.echo(findings_mod.render_json(results, {
            "library": library.skills_dir, "skills": len(library.skills), "cases": len(library.read_cases()),
            "unreadable_eval_files": [c.file for c in library.unreadable_files()],
            **({"layout": layout.kind, "roots": layout.roots, "layout_note": layout.note} if layout else {})}))
    elif fmt == "github":
        from runner.corpus import repopath  # GitHub reads `file=` from the repository root, not the library's
        click.echo(findings_mod.render_github(results, repopath.prefix(loaded.root)))
    else:
        click.echo(findings_mod.render_text(results))
        unreadable = len(library.unreadable_files())
        click.echo(f"checked {len(library.skills)} skill(s), {len(library.read_cases()):,} case(s), "
                   f"{len(library.probes)} probe(s) in {library.read_from()}"
                   + (f"; {unreadable} eval file(s) of which no case could be read" if unreadable else ""))
        if library.layout is not None:
            click.echo(f"layout: {library.layout.description}; read {', '.join(library.layout.roots) or 'nothing'} "
                       f"({library.layout.note})")
    sys.exit(EXIT_FINDINGS if findings_mod.has_errors(results) else EXIT_OK)


@click.command(short_help="What the eval corpus contains: cases, refusals, assertions.")
@options.library_option
@options.config_option
@options.format_option(["text", "json"], "text = tables for a person; json = every count, list and rule (with the "
                                         "library's layout).")
def census(library_path: Path, config: Path | None, fmt: str) -> None:
    """What the eval corpus contains: cases by kind, refusals, assertion classes, listing budget."""
    loaded = context.load(library_path, config)
    from runner.floor import census as census_mod  # imported here: rich costs start-up time `validate` need not pay

    results = loaded.findings + validate_mod.check_library(loaded.library, loaded.settings)
    report = census_mod.compute(loaded.library, loaded.settings, results)
    if fmt == "json":
        click.echo(report.model_dump_json(indent=2))
    else:
        census_mod.render_text(report, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_OK)


@click.command(short_help="Which skills the model sees, with or without description.")
@options.library_option
@options.config_option
@options.host_option("claude-code = the listing Claude Code builds; api = the direct-API approximation's. Default "
                     "[run] host (claude-code).")
@options.model_option("The model named in the captured request (default [run] model); no model is called.")
@options.listing_budget_option("SLASH_COMMAND_TOOL_CHAR_BUDGET: characters of the skill listing (default: the "
                               "host's own).")
@options.format_option(["text", "json"], "text = counts and names; json = surface.json (every skill, the request's "
                                         "size).")
def surface(library_path: Path, config: Path | None, host: str | None, model: str | None,
            listing_budget: int | None, fmt: str) -> None:
    """What the model is shown: which skills keep their description (no spend, no key)."""
    loaded = context.load(library_path, config)  # before the slow import below: a bad path fails fast
    from runner.hosts import prices as prices_mod
    from runner.pipeline import run as runs_mod

    settings, _ = runs_mod.apply_options(loaded.settings, context.run_options(
        loaded.settings, host=host, model=model, listing_budget=listing_budget))
    credentials = context.credentials({})
    prices = prices_mod.load(settings)
    the_host = runs_mod.make_host(settings.run.host, loaded.library, settings, credentials, prices, "")
    result = asyncio.run(runs_mod.audit_surface(the_host, loaded.library, settings.run.model))
    if fmt == "json":
        click.echo(result.model_dump_json(indent=2))
    else:
        print_surface(result, Console(soft_wrap=True, highlight=False))
    sys.exit(EXIT_FINDINGS if result.error else EXIT_OK)
