"""The publisher seam: a forge is one module and one entry in runner.publish.forges.FORGES.

A forge of our own (it records what `publish` asks of it) is registered through the table, `skill-evals publish`
runs on a real run folder, and it must get what GitHub gets (the conclusion, the title, the report and the comment
body, as PyGithub posts them to the fake GitHub). runner.publish.rules, the forge-neutral part, imports no forge SDK.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from runner.cli import reporting
from runner.publish import forges
from runner.publish.rules import MARKER, ROLLUP_ROOM, Mode, Publication
from runner.results.build import Results
from runner.testing.fake_github import FakeGitHub
from tests.conftest import cli
from tests.report_fixtures import every_state, large

TOKEN = "ghs_SEAM-TOKEN-3c9e1a"
HEAD = "c" * 40
PR = 11
RUN_URL = "https://github.com/acme/skills/actions/runs/31"
SEAM_VARIABLE = "SEAM_FORGE_CI"


@dataclass
class RecordingForge:
    """A forge that posts nothing anywhere: it records each call publish makes through the Forge protocol."""

    calls: list[tuple[str, object]] = field(default_factory=list)
    text_limit: int = 65_535
    run_url: str | None = RUN_URL

    def own(self, run_dir: Path | None, library: Path | None) -> str | None:
        self.calls.append(("own", (run_dir, library)))
        return None

    def no_results(self, mode: Mode) -> str | None:
        self.calls.append(("no_results", mode))
        return None

    def publish(self, publication: Publication, results: Results, *, comment: bool, path_prefix: str) -> str:
        self.calls.append(("publish", (publication, results, comment, path_prefix)))
        return json.dumps({"conclusion": publication.conclusion, "title": publication.title})

    def published(self) -> Publication:
        found = [args for name, args in self.calls if name == "publish"]
        assert len(found) == 1, self.calls
        publication = found[0][0]  # type: ignore[index]
        assert isinstance(publication, Publication)
        return publication


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecordingForge]:
    """A forge of our own in the table while the test runs (monkeypatch removes the entry after it)."""
    forge = RecordingForge()

    def make(environ: Mapping[str, str], options: Mapping[str, object]) -> RecordingForge:
        assert options == {}, "a forge without options of its own is given none"
        return forge

    monkeypatch.setitem(forges.FORGES, "seam", forges.ForgeSpec(
        "Seam", "records what publish asks", variables=(SEAM_VARIABLE,), make=make))
    yield forge


@pytest.fixture
def no_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    """No forge's variables and no CI: each test sets what it means (the suite itself may run in GitHub Actions)."""
    for name in ["CI", SEAM_VARIABLE, *(v for spec in forges.FORGES.values() for v in spec.variables)]:
        monkeypatch.delenv(name, raising=False)


def run_folder(path: Path, results: Results) -> Path:
    path.mkdir(parents=True)
    (path / "results.json").write_text(results.model_dump_json(indent=2), encoding="utf-8")
    return path


def github_env(monkeypatch: pytest.MonkeyPatch, gh: FakeGitHub, tmp_path: Path) -> None:
    event = tmp_path / "event.json"
    event.write_text(json.dumps({"pull_request": {"number": PR, "head": {"sha": HEAD, "repo": {
        "full_name": gh.repository}}, "base": {"repo": {"full_name": gh.repository}}}}), encoding="utf-8")
    for name, value in {"GITHUB_API_URL": gh.url, "GITHUB_REPOSITORY": gh.repository, "GITHUB_TOKEN": TOKEN,
                        "GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event), "GITHUB_SHA": HEAD,
                        "GITHUB_RUN_ID": "31", "GITHUB_SERVER_URL": "https://github.com",
                        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md")}.items():
        monkeypatch.setenv(name, value)


@pytest.mark.usefixtures("no_ci")
@pytest.mark.parametrize(("results", "mode"), [(every_state(), "required"), (large(2000), "advisory")],
                         ids=["every-state-required", "large-cut-advisory"])
def test_a_forge_of_our_own_gets_what_github_posts(results: Results, mode: str, recording: RecordingForge,
                                                   tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_folder(tmp_path / "run", results)
    link = ("--link", "report=https://example.com/report.html")
    with FakeGitHub(token=TOKEN) as gh:
        github_env(monkeypatch, gh, tmp_path)
        on_github = cli("publish", str(run), "--forge", "github", "--mode", mode, *link)
        outcome = json.loads(on_github.stdout)
        check = gh.check_runs[outcome["check_run_id"]]
        comment = gh.comments[outcome["comment_id"]]["body"]
        requests = len(gh.requests)
        ours = cli("publish", str(run), "--forge", "seam", "--mode", mode, *link)
        assert len(gh.requests) == requests, "publishing to our forge sent nothing to GitHub"

    publication = recording.published()
    assert (publication.conclusion, publication.title) == (check["conclusion"], check["output"]["title"])
    assert publication.report == check["output"]["summary"]
    assert publication.comment == comment and f"[workflow run]({RUN_URL})" in comment
    assert ours.exit_code == on_github.exit_code == (1 if check["conclusion"] == "failure" else 0)
    assert json.loads(ours.stdout) == {"conclusion": check["conclusion"], "title": check["output"]["title"]}
    _, _, asked_comment, prefix = next(args for name, args in recording.calls if name == "publish")  # type: ignore[misc]
    assert asked_comment is True and prefix == ""
    if mode == "advisory":  # 2,000 cases do not fit: the rules fitted the rollup to the forge's bytes, as GitHub's
        assert "This report was shortened" in comment and len(comment.encode("utf-8")) <= 65_535


@pytest.mark.usefixtures("no_ci")
def test_the_forge_is_the_one_whose_ci_variables_are_set(recording: RecordingForge, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_folder(tmp_path / "run", every_state())
    monkeypatch.setenv(SEAM_VARIABLE, "true")
    monkeypatch.setenv("CI", "true")
    chosen = cli("publish", str(run))
    assert chosen.exit_code == 0, chosen.output
    assert recording.published().title.startswith("PASS 1")
    # The GitHub-only options are GitHub's: with another forge they are refused, never ignored.
    other = cli("publish", str(run), "--check-run-id", "5")
    assert other.exit_code == 2 and "--check-run-id is an option of another forge" in other.output, other.output
    # Two forges' variables: which one is meant cannot be told.
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    both = cli("publish", str(run))
    assert both.exit_code == 2 and "more than one forge (github, seam)" in both.output, both.output
    assert len([name for name, _ in recording.calls if name == "publish"]) == 1


@pytest.mark.usefixtures("no_ci")
def test_a_ci_no_forge_recognises_publishes_nothing_and_says_so(recording: RecordingForge, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """As before there was a forge table: `publish` in a CI that is not GitHub's posts nothing, says so, exits 0."""
    run = run_folder(tmp_path / "run", every_state())
    monkeypatch.setenv("CI", "true")
    quiet = cli("publish", str(run))
    assert quiet.exit_code == 0, quiet.output
    assert "nothing was published" in json.loads(quiet.stdout)["notes"][0]
    unknown = cli("publish", str(run), "--forge", "nosuch")
    assert unknown.exit_code == 2 and f"'nosuch' is not a forge: use one of {', '.join(forges.FORGES)}" in unknown.output
    assert recording.calls == []


@pytest.mark.usefixtures("no_ci")
def test_the_publication_is_fitted_to_the_forges_own_limit(recording: RecordingForge, tmp_path: Path) -> None:
    recording.text_limit = 20_000  # bytes: a forge whose comments hold less than GitHub's
    run = run_folder(tmp_path / "run", large(2000))
    done = cli("publish", str(run), "--forge", "seam")
    assert done.exit_code == 0, done.output
    publication = recording.published()
    assert publication.comment.startswith(MARKER) and "This comment is updated in place" in publication.comment
    assert len(publication.comment.encode("utf-8")) <= 20_000
    # The report is fitted to that limit (less the footer's room), not to GitHub's, and not cut short of it.
    assert 20_000 - ROLLUP_ROOM - 2_000 < len(publication.report.encode("utf-8")) <= 20_000 - ROLLUP_ROOM // 2


def test_the_publish_command_does_not_branch_on_a_forge() -> None:
    """The command reads no forge's name or option: GitHub's options are in its table entry, read by its forge."""
    code = reporting.publish.callback.__code__  # type: ignore[union-attr]
    words = " ".join([*(c for c in code.co_consts if isinstance(c, str)), *code.co_names]).lower()
    assert "github" not in words and "check_run_id" not in words and "improve" not in words
    offered = {o for p in reporting.publish.params for o in getattr(p, "opts", ())}
    assert {o for spec in forges.FORGES.values() for p in spec.options for o in p.opts} <= offered


PROBE = """
import sys
import {module}
print(sorted(m for m in sys.modules if m == "github" or m.startswith("github.") or m == "runner.publish.github"))
"""


@pytest.mark.parametrize(("module", "loads_github"), [("runner.publish.rules", False),
                                                      ("runner.publish.forges", False),
                                                      ("runner.publish.github", True)])
def test_the_forge_neutral_rules_import_no_forge_sdk(module: str, loads_github: bool) -> None:
    done = subprocess.run([sys.executable, "-c", PROBE.format(module=module)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.strip().replace("'", '"'))
    # runner.publish.github is the control: the probe sees PyGithub when it is imported.
    assert bool(loaded) is loads_github and ("github" in loaded) is loads_github, (module, loaded)
