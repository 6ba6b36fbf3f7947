"""The forges by name: where `skill-evals publish` posts a run, and what publishing needs from a forge.

One table, like runner.report.formats: `publish --forge` offers what is listed here, and without it takes the forge
whose CI variables are set. The command reads the options every forge shares, asks runner.publish.rules for the
publication (conclusion, title, the fitted rollup, the comment) and hands it to the forge through `Forge`; a forge's
own options are declared in its entry and read by the forge, never branched on by the command. The forge's module
is imported when it is chosen: PyGithub is imported only when GitHub is.

A new forge is one module (the `Forge`, and the factory its entry names) and one entry in FORGES, plus its section
in docs/cli.md (tests/test_forge_seam.py registers a forge of its own through this table and publishes a real run).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import click

if TYPE_CHECKING:
    from runner.publish.rules import Mode, Publication
    from runner.results.build import Results


class Refused(ValueError):
    """The forge cannot do what it was asked as asked (its own options clash): the command says it as a usage error."""


class Forge(Protocol):
    """What publishing needs from a forge. Every method returns the JSON the command prints (the forge's outcome:
    what was posted, and notes saying what was not and why); none raises for what the forge's API answers."""

    @property
    def text_limit(self) -> int:
        """The UTF-8 bytes a status's summary or a comment body holds: the publication is fitted to it."""
        ...

    @property
    def run_url(self) -> str | None:
        """The CI run's page, linked from the report beside `--link`'s reports (None: none known)."""
        ...

    def own(self, run_dir: Path | None, library: Path | None) -> str | None:
        """Do what the forge's own options ask instead of publishing RUN_DIR (GitHub: `--start`, `--improve`);
        None when they ask nothing of the kind. Refused: they clash with RUN_DIR or with each other."""
        ...

    def no_results(self, mode: Mode) -> str | None:
        """RUN_DIR left no readable results.json: close what was started for the run (GitHub: the check run
        `--check-run-id` names) as "no results", claiming nothing; None when nothing was started."""
        ...

    def publish(self, publication: Publication, results: Results, *, comment: bool, path_prefix: str) -> str:
        """Post `publication`: the status or check with its conclusion and title (annotations at the failing
        cases' eval files, `path_prefix` before their paths, where the forge has them), the one comment found by
        its marker and edited in place (none when `comment` is false), the job summary where the CI has one."""
        ...


@dataclass(frozen=True)
class ForgeSpec:
    """One forge of the table: how `publish` offers it, finds it in the CI environment and makes it."""

    title: str  # the forge's name in a sentence ("GitHub"): in help, usage errors and the note of a cut text
    help: str  # what publishing there writes, after "NAME = " in `publish --help`
    variables: tuple[str, ...]  # its CI's environment variables: any of them set (non-empty) chooses this forge
    make: Callable[[Mapping[str, str], Mapping[str, object]], Forge]  # (environment, its own options' values)
    options: tuple[click.Option, ...] = ()  # its own options of `publish`, read by `make` only


def _github(environ: Mapping[str, str], options: Mapping[str, object]) -> Forge:
    from runner.publish import github
    return github.GitHubForge.from_env(environ, options)


_GITHUB_OPTIONS = (
    click.Option(["--start"], is_flag=True,
                 help="GitHub: only create the check run in progress (no RUN_DIR), with the workflow run as its "
                      "details; prints its check_run_id, for the final publish's --check-run-id."),
    click.Option(["--check-run-id"], type=click.IntRange(min=1), default=None,
                 help="GitHub: complete this check run (the one --start created) instead of looking it up by "
                      "commit. With no results.json in RUN_DIR, it is completed as 'no results' rather than left in "
                      "progress."),
    click.Option(["--improve", "improve_dirs"], multiple=True, metavar="DIR",
                 type=click.Path(path_type=Path, file_okay=False, exists=True),
                 help="GitHub: instead of a run, an `improve` output folder (its improve.json). A candidate `better` "
                      "on the held-out test is posted as one review comment with a suggestion on SKILL.md's "
                      "description line (a PR comment with the diff when that line is not in the pull request's "
                      "diff); any other verdict posts nothing and the job summary says why. Never a commit. "
                      "Repeatable; --library (default .) is the checkout the SKILL.md is read from."),
)

FORGES: dict[str, ForgeSpec] = {
    "github": ForgeSpec("GitHub", "a check run with annotations, one PR comment, the job summary (GitHub Actions)",
                        variables=("GITHUB_ACTIONS", "GITHUB_REPOSITORY", "GITHUB_TOKEN", "GITHUB_STEP_SUMMARY",
                                   "GITHUB_EVENT_PATH", "GITHUB_SHA"),
                        make=_github, options=_GITHUB_OPTIONS),
}
# Where no forge's variables are set (a developer's machine, a CI no forge recognises) publish keeps the answer it
# always gave: GitHub says in one sentence that nothing was published and where the results are, and exits 0 (a
# pipeline that ran `publish` outside GitHub before the forge table must not start failing).
DEFAULT = "github"
NAMES: tuple[str, ...] = tuple(FORGES)
OPTION_HELP = ("Where to publish: " + "; ".join(f"{name} = {spec.help}" for name, spec in FORGES.items())
               + ". Default: the forge whose CI variables are set.")


def detect(environ: Mapping[str, str]) -> str:
    """The forge whose CI variables are set; the default when none are. Refused, naming the forges and the
    variables each is recognised by, when two claim the environment."""
    claimed = [name for name, spec in FORGES.items() if any(environ.get(v) for v in spec.variables)]
    if len(claimed) == 1:
        return claimed[0]
    known = "; ".join(f"{name} ({spec.title}: {', '.join(spec.variables)})" for name, spec in FORGES.items())
    if claimed:
        raise Refused(f"the environment has the variables of more than one forge ({', '.join(claimed)}): name one "
                      f"with --forge. Forges: {known}")
    if DEFAULT not in FORGES:
        raise Refused(f"no forge's variables are set, so publish cannot tell where to post: name one with --forge. "
                      f"Forges: {known}")
    return DEFAULT
