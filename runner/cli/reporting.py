"""`report` and `publish`: a finished run, from its results.json only, for a person, a file or GitHub."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console

from runner.cli import options
from runner.cli.app import EXIT_FINDINGS, EXIT_OK, fail_usage
from runner.cli.environment import PUBLISH_ENVIRONMENT
from runner.cli.folders import read_results, results_problem
from runner.report import formats

if TYPE_CHECKING:  # imported when publish runs: the other commands start without PyGithub
    from runner.publish.github import Context


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


@click.command(cls=_ReportCommand, short_help=formats.SHORT_HELP)
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False, exists=True))
@options.format_option(formats.NAMES, formats.OPTION_HELP, default="terminal")
@click.option("--out", type=click.Path(path_type=Path, dir_okay=False), default=None, callback=options.writable_file,
              help="Write the report to this file instead of standard output.")
@click.option("--previous", "previous", multiple=True, metavar="DIR...",
              type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Earlier run folders, oldest first, after RUN_DIR: `--previous A B` or `--previous A --previous "
                   "B`. Adds state changes, flips, quarantine candidates and the stability record.")
@click.option("--history", "history_dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              default=None, help="A folder of earlier run folders (each with its results.json): the newest "
                                 "--last of them, by finished_at, are compared as --previous would be.")
@click.option("--last", type=options.AT_LEAST_ONE, default=9, show_default=True,
              help="With --history: how many earlier runs to take (the current run comes on top).")
@click.option("--limit", type=options.AT_LEAST_ONE, default=65_000, show_default=True,
              help="Markdown: fit this many characters (GitHub comments take 65,535).")
def report(run_dir: Path, fmt: str, out: Path | None, previous: tuple[Path, ...], limit: int,
           history_dir: Path | None = None, last: int = 9) -> None:
    """Render a finished run from its results.json: terminal, Markdown, JUnit XML, HTML or JSON."""
    results = read_results(run_dir)
    history = None
    earlier = list(previous) + (history_runs(history_dir, run_dir, last) if history_dir is not None else [])
    if earlier:
        from runner.report import history as history_mod
        # Labelled by folder: two runs that finished in the same second stay apart.
        history = history_mod.compare(results, [read_results(p) for p in earlier],
                                      labels=[str(p) for p in earlier], current_label=str(run_dir))
    chosen = formats.FORMATS[fmt]
    rendered = formats.Report(results=results, run_dir=run_dir, history=history, limit=limit)
    if chosen.show is not None and out is None:
        chosen.show(rendered, Console(soft_wrap=True, highlight=False))
        sys.exit(EXIT_OK)
    try:
        text = chosen.render(rendered)
    except formats.LimitTooSmall as exc:  # not even the counts fit: never drop them
        fail_usage(f"--limit {limit} is too small for this report's counts: {exc}")
    if out:
        out.write_text(text, encoding="utf-8")
        click.echo(f"wrote {out}")
    else:
        click.echo(text)
    sys.exit(EXIT_OK)


def history_runs(folder: Path, current: Path, last: int) -> list[Path]:
    """The run folders directly under `folder` (those with a results.json, not the current run), the newest
    `last` by finished_at."""
    from runner.results.build import moment

    found = [(moment(read_results(p).finished_at), p) for p in sorted(folder.iterdir())
             if p.is_dir() and (p / "results.json").is_file() and p.resolve() != current.resolve()]
    return [p for _, p in sorted(found, key=lambda pair: pair[0])[-last:]]


@click.command(short_help="Post the check run, the PR comment and the job summary.", epilog=PUBLISH_ENVIRONMENT)
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
@click.option("--improve", "improve_dirs", multiple=True, metavar="DIR",
              type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Instead of a run: an `improve` output folder (its improve.json). A candidate `better` on the "
                   "held-out test is posted as one review comment with a suggestion on SKILL.md's description line "
                   "(a PR comment with the diff when that line is not in the pull request's diff); any other "
                   "verdict posts nothing and the job summary says why. Never a commit. Repeatable; --library "
                   "(default .) is the checkout the SKILL.md is read from.")
def publish(run_dir: Path | None, mode: str, no_comment: bool, start: bool = False, check_run_id: int | None = None,
            library_path: Path | None = None, links: tuple[str, ...] = (), improve_dirs: tuple[Path, ...] = ()) -> None:
    """Post the check run, the PR comment (edited in place) and the job summary from results.json."""
    from runner.publish import github as github_mod

    ctx = github_mod.Context.from_env(os.environ)
    token = os.environ.get("GITHUB_TOKEN") or None
    if improve_dirs:
        if run_dir is not None or start:
            fail_usage("publish --improve takes no RUN_DIR and no --start: it posts the improve folders' suggestions")
        publish_improvements(improve_dirs, ctx, token, library_path or Path("."))
    if start:
        if run_dir is not None:
            fail_usage("publish --start takes no RUN_DIR: the run has not written one yet")
        click.echo(github_mod.start(ctx, token).model_dump_json(indent=2))
        sys.exit(EXIT_OK)
    if run_dir is None:
        fail_usage("publish needs RUN_DIR (or --start)")
    if any("=" not in link for link in links):
        fail_usage("--link takes LABEL=URL")
    labelled = dict(link.split("=", 1) for link in links)
    results, problem = results_problem(run_dir)
    if results is None:
        if check_run_id is None:
            fail_usage(problem)
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


def publish_improvements(folders: tuple[Path, ...], ctx: Context, token: str | None, library_path: Path) -> None:
    """`publish --improve DIR...`: each folder's suggestion (runner.publish.suggestion); prints their outcomes."""
    import json

    from runner.corpus import layout
    from runner.improve.loop import IMPROVE_JSON
    from runner.improve.model import Improve
    from runner.publish import github as github_mod
    from runner.publish import suggestion
    from runner.results import modelfile

    try:
        root = layout.locate(library_path).root
    except layout.LibraryError as exc:
        fail_usage(f"--library: {exc}")
    prefix, _ = github_mod.library_prefix(library_path, root)
    records = []
    for folder in folders:
        if not (folder / IMPROVE_JSON).exists():
            fail_usage(f"{folder}: no {IMPROVE_JSON} (not an improve folder)")
        records.append(modelfile.read(folder / IMPROVE_JSON, Improve, "an improve record of this runner"))
    outcomes = [suggestion.publish_suggestion(record, ctx, token, root, path_prefix=prefix) for record in records]
    click.echo(json.dumps([o.model_dump(mode="json") for o in outcomes], indent=2))
    sys.exit(EXIT_OK)
