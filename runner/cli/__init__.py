"""The command line, `skill-evals` (and `python -m runner`): parses options, calls the stages, prints.
"""

from runner.cli.commands import main

__all__ = ["main"]
