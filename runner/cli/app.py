"""The command group `skill-evals` itself: its exit codes, the one way a usage error ends a command, and the
checks every argument passes before any command sees it.

Exit codes: 0 no error-level finding, 1 an error-level finding, 2 a usage error or a path that holds no library, 130
stopped by Ctrl-C (SIGINT).
Bad input never produces a traceback: it produces findings, or one line that says what to change.
"""

from __future__ import annotations

import io
import sys
from typing import Any, NoReturn

import click

from runner.core.errors import UsageError
from runner.corpus.findings import is_unicode, printable

EXIT_OK, EXIT_FINDINGS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def fail_usage(message: str) -> NoReturn:
    click.echo(f"skill-evals: {message}", err=True)
    sys.exit(EXIT_USAGE)


class Commands(click.Group):
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

    def invoke(self, ctx: click.Context) -> Any:
        # The stages raise a UsageError (a missing library, a selection that cannot be made, a run folder that
        # cannot be resumed, ...) with a message that already names the input: every command ends on one the same
        # way, here, instead of each listing the kinds it may meet.
        try:
            return super().invoke(ctx)
        except UsageError as exc:
            fail_usage(str(exc))
        except KeyboardInterrupt:
            # Ctrl-C outside a run's sessions (those end on their own SIGINT handler, with results.json): 130, as a
            # shell reports a program stopped by SIGINT, with one line instead of click's "Aborted!" and 1.
            click.echo("\nskill-evals: interrupted (Ctrl-C); nothing more was started", err=True)
            sys.exit(EXIT_INTERRUPTED)


def _printing_never_fails() -> None:
    """A terminal that cannot show a character (an ASCII locale) gets an escape, never a UnicodeEncodeError."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
        except (AttributeError, ValueError, io.UnsupportedOperation):
            pass


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="skill-evals")
def main() -> None:
    """Execute the evals of an Agent Skills library, honestly."""
    _printing_never_fails()
