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
from runner.publish import forges
from runner.report import formats

if TYPE_CHECKING:
    from runner.publish.rules import Mode


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


def _forge_name(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    # Checked against the table when the command runs (not a click.Choice fixed at import): a forge registered in
    # runner.publish.forges.FORGES is offered, whoever registered it.
    if value is not None and value not in forges.FORGES:
        raise click.BadParameter(f"{value!r} is not a forge: use one of {', '.join(forges.FORGES)}")
    return value


@click.command(short_help="Post the check run, the PR comment and the job summary.", epilog=PUBLISH_ENVIRONMENT)
@click.argument("run_dir", type=click.Path(path_type=Path, file_okay=False), required=False)
@click.option("--forge", "forge_name", default=None, metavar="[" + "|".join(forges.NAMES) + "]",
              callback=_forge_name, help=forges.OPTION_HELP)
@click.option("--mode", type=click.Choice(["advisory", "required"]), default="advisory", show_default=True,
              help="required: a failing run fails the check (a human's choice, after the stability record).")
@click.option("--no-comment", is_flag=True, help="Do not create or edit the PR comment.")
@click.option("--library", "library_path", type=click.Path(path_type=Path), default=None,
              help="The library the run read: annotation paths are made relative to its repository's root "
                   "(default: the library root plan.json names, when it exists here).")
@click.option("--link", "links", multiple=True, metavar="LABEL=URL",
              help="A report uploaded elsewhere (e.g. an artifact's URL), linked from the summary, the comment and "
                   "the job summary. Repeatable.")
def publish(run_dir: Path | None, mode: Mode, no_comment: bool, forge_name: str | None = None,
            library_path: Path | None = None, links: tuple[str, ...] = (), **forge_options: object) -> None:
    """Post the check run, the PR comment (edited in place) and the job summary from results.json."""
    from runner.publish import rules

    try:
        name = forge_name or forges.detect(os.environ)
    except forges.Refused as exc:
        fail_usage(f"publish: {exc}")
    spec = forges.FORGES[name]
    own = {option.name for option in spec.options}
    for other in (o for s in forges.FORGES.values() if s is not spec for o in s.options if o.name not in own):
        if forge_options.get(other.name or "") not in (None, False, ()):
            fail_usage(f"{other.opts[0]} is an option of another forge, not of {spec.title} (--forge {name})")
    forge = spec.make(os.environ, {key: value for key, value in forge_options.items() if key in own})
    try:
        done = forge.own(run_dir, library_path)
    except forges.Refused as exc:
        fail_usage(str(exc))
    if done is not None:
        click.echo(done)
        sys.exit(EXIT_OK)
    if run_dir is None:
        fail_usage("publish needs RUN_DIR")
    if any("=" not in link for link in links):
        fail_usage("--link takes LABEL=URL")
    labelled = dict(link.split("=", 1) for link in links)
    results, problem = results_problem(run_dir)
    if results is None:
        closed = forge.no_results(mode)
        if closed is None:
            fail_usage(problem)
        click.echo(closed)
        sys.exit(EXIT_FINDINGS if rules.no_results_conclusion(mode) == "failure" else EXIT_OK)
    prefix, note = rules.library_prefix(library_path, run_dir)
    publication = rules.publication(results, mode, forge=spec.title, text_limit=forge.text_limit, links=labelled,
                                    run_url=forge.run_url, notes=[note] if note else [])
    click.echo(forge.publish(publication, results, comment=not no_comment, path_prefix=prefix))
    sys.exit(EXIT_FINDINGS if publication.conclusion == "failure" else EXIT_OK)


for _spec in forges.FORGES.values():  # each forge's own options, read by that forge (runner.publish.forges)
    publish.params.extend(_spec.options)
