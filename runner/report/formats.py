"""The report formats by name: what `skill-evals report --format` offers, and how each renders a finished run.

One table, so that the command's choices and what it does with each cannot drift apart: a format added here is
offered and rendered, with nothing to add to the command. The renderers are imported when used (rich, the HTML
page's code): the command pays only for the format it was asked for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from runner.report.history import History
    from runner.results.build import Results


@dataclass(frozen=True)
class Report:
    """What a format renders: the run, its folder (the HTML page reads its transcripts), and how it compares with
    earlier runs (state changes, flips, the stability record), when there are any."""

    results: Results
    run_dir: Path
    history: History | None = None
    limit: int = 65_000  # Markdown: the characters to fit (GitHub comments take 65,535)


class LimitTooSmall(ValueError):
    """Not even the counts fit in the Markdown limit: they are never dropped to make the rollup fit."""


@dataclass(frozen=True)
class Format:
    title: str  # the format's name in a sentence ("Markdown"), for the command's one-line help
    help: str  # what the format is, after "NAME = " in `report --help`
    render: Callable[[Report], str]  # the text, written to a file or to standard output
    show: Callable[[Report, Console], None] | None = None  # what a terminal shows instead, when not written to a file


def _history_markdown(history: History) -> str:
    from runner.report import history as history_mod
    return history_mod.render_markdown(history)


def _markdown(report: Report) -> str:
    from runner.report import history as history_mod
    from runner.report import markdown
    extra = "\n\n" + _history_markdown(report.history) if report.history is not None else ""
    changed = tuple(history_mod.changed_since_lines(report.history)) if report.history is not None else ()
    try:
        return markdown.render(report.results, limit=report.limit - len(extra), changed=changed) + extra
    except ValueError as exc:
        raise LimitTooSmall(str(exc)) from exc


def _terminal(report: Report, console: Console) -> None:
    from runner.report import terminal
    terminal.render(report.results, console)
    if report.history is not None:  # rendered for a terminal: headings, lists and tables, not Markdown's marks
        from rich.markdown import Markdown
        console.print(Markdown(_history_markdown(report.history)))


def _junit(report: Report) -> str:
    from runner.report import junit
    return junit.render(report.results)


def _html(report: Report) -> str:
    from runner.report import html
    from runner.results.host_comparison import first_folder
    # A comparison of hosts: the attempts and transcripts are the first host's run folder's.
    return html.render(report.results, first_folder(report.run_dir, report.results), history=report.history)


def _json(report: Report) -> str:
    return report.results.model_dump_json(indent=2)


FORMATS: dict[str, Format] = {
    # Written to a file, the terminal report is the rollup.
    "terminal": Format("terminal", "rich tables", render=_markdown, show=_terminal),
    "markdown": Format("Markdown", "the PR comment's rollup", render=_markdown),
    "junit": Format("JUnit", "JUnit XML", render=_junit),
    "html": Format("HTML", "one self-contained page", render=_html),
    "json": Format("JSON", "results.json as it is", render=_json),
}
NAMES: tuple[str, ...] = tuple(FORMATS)
SHORT_HELP = "Render results.json: " + ", ".join(f.title for f in FORMATS.values()) + "."
OPTION_HELP = "; ".join(f"{name} = {f.help}" for name, f in FORMATS.items()) + "."
