"""Issue 29 items 10 and 11 on the synthetic libraries of tests/round2_probes.py.

Item 10: an eval file of which no case can be read is one UNRUN entry (eval-file-unreadable) in results.json and
every rendering, its skill is listed wherever "held back: listed below" is printed, and counts of cases leave it
out. Item 11: `[probes] allow_uncalibrated` runs a probe without a calibration, labelled uncalibrated everywhere;
two probes with byte-identical question.md are a review finding naming both files.
"""

from __future__ import annotations

import html as html_lib
import io
from pathlib import Path

from rich.console import Console

from runner.corpus.loader import load_library
from runner.corpus.settings import ProbeSettings, Settings
from runner.floor import census, validate
from runner.plan.plan import ProbeGate
from runner.plan.planner import probe_unrun_reason
from runner.report import html, junit, markdown, terminal
from runner.results import modelfile
from runner.results.build import Results
from tests.conftest import fake_env, run_cli
from tests.round2_probes import LIBRARIES


def build(name: str, tmp_path: Path) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    return LIBRARIES[name](folder)


def run_without_key(library: Path, out: Path, *args: str) -> tuple[str, Results]:
    done = run_cli("run", "--library", str(library), "--out", str(out), *args, env=fake_env(None, None))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout, modelfile.read(out / "results.json", Results, "results.json")


def renderings(results: Results) -> dict[str, str]:
    console = Console(file=io.StringIO(), width=250, record=True)
    terminal.render(results, console)
    return {"terminal": console.export_text(), "markdown": markdown.render(results),
            "html": html_lib.unescape(html.render(results)), "junit": html_lib.unescape(junit.render(results))}


def test_an_eval_file_that_does_not_parse_is_unrun_in_results_and_every_report(tmp_path: Path) -> None:
    library = build("unreadable-eval-files", tmp_path)
    printed, results = run_without_key(library, tmp_path / "run")
    by_uid = {case.uid: case for case in results.cases}
    beta = by_uid["beta/file/evals/evals.json"]
    assert (beta.state, beta.reason, beta.skill) == ("UNRUN", "eval-file-unreadable", "beta")
    assert beta.detail is not None and beta.detail.startswith("skills/beta/evals/evals.json:3:1: [json-syntax]")
    gamma_file = by_uid["gamma/file/evals/trigger-evals.json"]
    assert gamma_file.reason == "eval-file-unreadable" and "[eval-format-unknown]" in (gamma_file.detail or "")
    assert by_uid["gamma/evals/1"].reason == "floor-error"  # the rest of a held-back skill stays held back
    # A probe folder keeps its uid: the one case it is, invalid, while the skill's other case may run.
    assert by_uid["delta/probe/release-note"].reason == "invalid-case"
    assert by_uid["delta/evals/1"].reason == "no-credentials"
    assert sorted(results.plan.held_back) == ["beta", "gamma"]
    assert results.unrun_by_reason["eval-file-unreadable"] == 2
    assert "2 of them stand for an eval file" in results.not_executed
    for file in (beta.file, gamma_file.file):
        assert (library / file).is_file()
    # "held back: listed below" is followed by the skills it counts.
    assert "2 skill(s) held back" in printed
    assert "\n  beta: skills/beta/evals/evals.json:3:1" in printed and "\n  gamma: " in printed
    for name, text in renderings(results).items():
        for uid in ("beta/file/evals/evals.json", "gamma/file/evals/trigger-evals.json"):
            assert uid in text, (name, uid)
        assert "eval-file-unreadable" in text, name


def test_held_back_lists_a_skill_even_when_none_of_its_cases_is_selected(tmp_path: Path) -> None:
    library = build("unreadable-eval-files", tmp_path)
    printed, results = run_without_key(library, tmp_path / "run", "--skill", "alpha", "--host", "api")
    assert sorted(results.plan.held_back) == ["beta", "gamma"]
    assert "2 skill(s) held back" in printed and "\n  beta: " in printed and "\n  gamma: " in printed
    assert [case.uid for case in results.cases] == ["alpha/evals/1"]


def test_census_and_validate_count_an_unreadable_file_apart_from_cases(tmp_path: Path) -> None:
    library, findings = load_library(build("unreadable-eval-files", tmp_path), Settings())
    counted = census.compute(library, Settings(), findings)
    # alpha, gamma and delta hold one readable case each; delta's probe folder is one (invalid) probe case.
    assert counted.cases.total == 4
    assert [ref.uid for ref in counted.cases.unreadable_files] == ["beta/file/evals/evals.json",
                                                                    "gamma/file/evals/trigger-evals.json"]
    # A skill whose eval file cannot be read is not said to have none.
    assert not [f for f in findings if f.rule == "evals-missing"]


def test_two_probes_with_one_question_are_a_review_finding_naming_both_files(tmp_path: Path) -> None:
    root = build("reused-question", tmp_path)
    library, _ = load_library(root, Settings())
    found = [f for f in validate.check_library(library, Settings()) if f.rule == "probe-question-reused"]
    assert len(found) == 1 and found[0].level.value == "warning"
    first, second = (f"skills/{name}/evals/probes/go-no-go/question.md" for name in ("release-gate", "ship-check"))
    assert found[0].file == second and first in found[0].message
    assert (root / first).is_file() and (root / second).is_file()
    # A probe with its own artifact is no finding.
    (root / second).write_text("Deploy log for the search indexer\n\nAll 9 shards rebuilt.\n", encoding="utf-8")
    library, _ = load_library(root, Settings())
    assert not [f for f in validate.check_library(library, Settings()) if f.rule == "probe-question-reused"]


def test_allow_uncalibrated_runs_a_probe_without_calibration_and_only_that() -> None:
    allowed = Settings(probes=ProbeSettings(allow_uncalibrated=True))
    for state in ("not-calibrated", "new-version", "in-progress"):
        gate = ProbeGate(state=state, content_hash="0" * 64)
        assert probe_unrun_reason(gate, Settings(), None) is not None
        assert probe_unrun_reason(gate, allowed, None) is None
        assert probe_unrun_reason(gate, allowed, "judge-disabled") == "probe-needs-judge (judge-disabled)"
    assert probe_unrun_reason(None, allowed, None) is None
    # A calibration that reached a verdict the settings do not run, or a record that cannot be read, still holds.
    floor = ProbeGate(state="calibrated", verdict="floor", content_hash="0" * 64)
    assert probe_unrun_reason(floor, allowed, None) == "probe-floor"
    unreadable = ProbeGate(state="unreadable", content_hash="0" * 64)
    assert probe_unrun_reason(unreadable, allowed, None) == "probe-calibration-unreadable"


def test_an_uncalibrated_probe_is_labelled_in_results_and_every_report(tmp_path: Path) -> None:
    library = build("uncalibrated-probe", tmp_path)
    _, results = run_without_key(library, tmp_path / "run", "--host", "api")
    probe = next(case for case in results.cases if case.kind == "probe")
    # Planned to run (not probe-not-calibrated): without a key it is UNRUN like every case that could run.
    assert (probe.reason, probe.calibration) == ("no-credentials", "uncalibrated")
    for name, text in renderings(results).items():
        assert "probe (uncalibrated)" in text, name
    # The same library without the setting keeps the probe UNRUN for want of a calibration, unlabelled.
    (library / ".skill-evals.toml").unlink()
    _, results = run_without_key(library, tmp_path / "run2", "--host", "api")
    probe = next(case for case in results.cases if case.kind == "probe")
    assert (probe.reason, probe.calibration) == ("probe-not-calibrated", None)
