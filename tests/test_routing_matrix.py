"""The routing matrix end to end (issue 34): a library built for the test (tests/routing_library.py) run through the
real pipeline — `skill-evals run` as a process, the api host, the fake Messages API scripting what fires on each
prompt — and every figure of results.json `routing` held against the counts taken by hand from that script. Then the
reports that show it: Markdown, terminal, JUnit, HTML (in headless Chromium), and what moved since a previous run."""

from __future__ import annotations

import json
import math
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from runner.core.quorum import wilson_interval
from runner.results import routing
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests import routing_library
from tests.browser import Browser, need_chromium
from tests.conftest import run_cli
from tests.helpers import KEY, results_of, skill_evals_run

N = 3  # --repeats 3 --no-early-stop: every attempt of every runnable case runs

# ---- the counts, by hand from routing_library.SCRIPT (N attempts per case) ----------------------------------------
# alpha: alpha-one, alpha-two, refusal-alpha-secrets fire alpha             -> alpha row 9, alpha 9
# beta:  beta-one fires alpha; beta-two alpha then beta; beta-three beta     -> beta row 9, alpha 6, beta 6; first alpha 6, beta 3
# gamma: gamma-one fires gamma (gamma-broken: 500s, ERROR, left out)         -> gamma row 3, gamma 3
# delta: delta-vs-gamma (discrimination) fires delta                         -> delta row 3, delta 3
# epsilon: two cases, nothing fires                                          -> epsilon row 6, none 6
# eta: eta-one fires eta                                                     -> eta row 3, eta 3
# none: gamma-not (no_trigger of gamma: delta fired, no claim of it -> none), delta-not (delta fires),
#       none-gamma (routing, expects no skill: gamma fires), none-quiet (nothing) -> none row 12, delta 3, gamma 3, none 6
# zeta: manual-only, UNRUN manual-only-target: 3 attempts excluded as UNRUN
EXPECTED_MATRIX = {
    "alpha": {"alpha": 3 * N},
    "beta": {"alpha": 2 * N, "beta": 2 * N},
    "delta": {"delta": N},
    "epsilon": {"none": 2 * N},
    "eta": {"eta": N},
    "gamma": {"gamma": N},
    "none": {"delta": N, "gamma": N, "none": 2 * N},
}
EXPECTED_FIRST = {**EXPECTED_MATRIX, "beta": {"alpha": 2 * N, "beta": N}}
EXPECTED_ROWS = {"alpha": 3 * N, "beta": 3 * N, "delta": N, "epsilon": 2 * N, "eta": N, "gamma": N, "none": 4 * N}
# tp: expected and fired; fp: fired, not expected; fn: expected, not fired.
EXPECTED_COUNTS = {
    "alpha": (3 * N, 2 * N, 0),    # fp: beta-one, beta-two
    "beta": (2 * N, 0, N),         # fn: beta-one
    "delta": (N, N, 0),            # fp: delta-not (gamma-not's delta is no claim)
    "epsilon": (0, 0, 2 * N),
    "eta": (N, 0, 0),
    "gamma": (N, N, 0),            # fp: none-gamma
}
EXPECTED_CONFUSIONS = [
    {"expected": "beta", "fired": "alpha", "attempts": 2 * N, "of": 3 * N, "first": 2 * N,
     "cases": ["beta/evals/beta-one", "beta/evals/beta-two"]},
    {"expected": "none", "fired": "delta", "attempts": N, "of": 4 * N, "first": N, "cases": ["delta/evals/delta-not"]},
    {"expected": "none", "fired": "gamma", "attempts": N, "of": 4 * N, "first": N,
     "cases": ["(library)/routing/none-gamma"]},
]


@pytest.fixture(scope="module")
def routed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    """One run of the routing library on the api host against the fake; its folder and results.json."""
    work = tmp_path_factory.mktemp("routing")
    library = routing_library.make(work / "library")
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        routing_library.script(fake)
        fake.default(routing_library.text("unscripted"))
        out = work / "run"
        done = skill_evals_run(fake, out, "--host", "api", "--repeats", str(N), "--quorum", "2", "--no-early-stop",
                               library=library)
        assert done.returncode == 0, done.stdout + done.stderr
        assert not fake.requests_for(routing_library.key_of("zeta/evals/zeta-one"))  # manual-only: never sent
    (work / "run-stdout.txt").write_text(done.stdout)
    return out, results_of(out)  # results_of validates results.json against the shipped schema


def test_the_cases_ran_as_scripted(routed: tuple[Path, dict[str, Any]]) -> None:
    _, results = routed
    by_uid = {c["uid"]: c for c in results["cases"]}
    assert set(by_uid) == set(routing_library.SCRIPT)
    for uid, case in by_uid.items():
        assert case["kind"] == routing_library.kind_of(uid), uid
    assert by_uid["gamma/evals/gamma-broken"]["state"] == "ERROR" and by_uid["gamma/evals/gamma-broken"]["errors"] == N
    assert (by_uid["zeta/evals/zeta-one"]["state"], by_uid["zeta/evals/zeta-one"]["reason"]) == \
        ("UNRUN", "manual-only-target")
    assert by_uid["beta/evals/beta-one"]["state"] == "FAIL" and by_uid["epsilon/evals/epsilon-one"]["state"] == "FAIL"
    assert all(c["repeats_run"] == N for uid, c in by_uid.items() if uid != "zeta/evals/zeta-one")


def test_run_prints_the_per_skill_routing_table(routed: tuple[Path, dict[str, Any]]) -> None:
    printed = (routed[0].parent / "run-stdout.txt").read_text()
    assert "Routing per skill" in printed and "beta's prompts fire alpha (6 of 9 attempts)" in printed
    assert KEY not in printed


def test_matrix_equals_the_hand_count(routed: tuple[Path, dict[str, Any]]) -> None:
    found = routed[1]["routing"]
    assert found["skills"] == ["alpha", "beta", "delta", "epsilon", "eta", "gamma", "none"]
    assert found["matrix"] == EXPECTED_MATRIX
    assert found["first_fired"] == EXPECTED_FIRST
    assert found["rows"] == EXPECTED_ROWS
    assert found["attempts"] == sum(EXPECTED_ROWS.values()) == 45
    # ERROR and UNRUN attempts are counted apart, never in a cell.
    assert found["excluded"] == {"ERROR": N, "QUARANTINED": 0, "UNRUN": N}
    assert found["unrun_by_reason"] == {"manual-only-target": N}
    assert "zeta" not in found["skills"]


def test_precision_recall_f1_equal_the_hand_count(routed: tuple[Path, dict[str, Any]]) -> None:
    per_skill = routed[1]["routing"]["per_skill"]
    assert set(per_skill) == set(EXPECTED_COUNTS)
    for name, (tp, fp, fn) in EXPECTED_COUNTS.items():
        one = per_skill[name]
        assert (one["tp"], one["fp"], one["fn"]) == (tp, fp, fn), name
        for key, (successes, trials) in (("precision", (tp, tp + fp)), ("recall", (tp, tp + fn)),
                                         ("f1", (2 * tp, 2 * tp + fp + fn))):
            rate = one[key]
            assert (rate["successes"], rate["trials"]) == (successes, trials), (name, key)
            assert rate["value"] == (round(successes / trials, 4) if trials else None), (name, key)
        wilson = wilson_interval(tp, tp + fp)
        if wilson is None:
            assert one["precision"]["interval"] is None
        else:
            low, high = one["precision"]["interval"]
            assert low <= wilson[0] and high >= wilson[1] and high - low - (wilson[1] - wilson[0]) < 2e-4
    # The thief: every attempt of its own, but 6 of 15 firings on another skill's prompts.
    assert per_skill["alpha"]["precision"]["value"] == 0.6 and per_skill["alpha"]["recall"]["value"] == 1.0
    # The skill that never fires: no precision to speak of, recall 0, F1 0 with an upper bound above 0.
    assert per_skill["epsilon"]["precision"]["value"] is None and per_skill["epsilon"]["recall"]["value"] == 0.0
    assert per_skill["epsilon"]["f1"]["value"] == 0.0 and per_skill["epsilon"]["f1"]["interval"][1] > 0
    r = wilson_interval(0, 2 * N, routing.Z_F1_CORNERS)
    assert r is not None and math.isclose(per_skill["epsilon"]["f1"]["interval"][1], routing.harmonic(1.0, r[1]),
                                          abs_tol=1e-4)


def test_confusions_ranked_with_their_cases(routed: tuple[Path, dict[str, Any]]) -> None:
    assert routed[1]["routing"]["confusions"] == EXPECTED_CONFUSIONS


# ---- where people read it --------------------------------------------------------------------------------------


def test_markdown_has_the_worst_confusions_and_the_per_skill_table(routed: tuple[Path, dict[str, Any]]) -> None:
    out, _ = routed
    done = run_cli("report", str(out), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    section = text.split("### Routing", 1)[1].split("\n### ", 1)[0]
    assert "beta's prompts fire alpha (6 of 9 attempts)" in section
    assert "prompts that expect no skill fire delta (3 of 12 attempts)" in section
    assert section.index("fire alpha") < section.index("fire delta") < section.index("fire gamma")
    row = next(line for line in section.splitlines() if line.startswith("| alpha |"))
    assert "9/15 (60%" in row and "9/9 (100%" in row
    assert "3 ERROR" in section and "3 UNRUN" in section
    # Within a small limit the routing section shrinks with the rest, and the counts stay.
    small = run_cli("report", str(out), "--format", "markdown", "--limit", "6000")
    assert small.returncode == 0, small.stderr
    assert len(small.stdout) <= 6001 and "### State counts" in small.stdout


def test_terminal_prints_the_per_skill_routing_table(routed: tuple[Path, dict[str, Any]]) -> None:
    out, _ = routed
    done = run_cli("report", str(out), env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    assert "Routing per skill" in done.stdout
    line = next(line for line in done.stdout.splitlines() if re.search(r"\balpha\b.*9/15", line))
    assert "9/9" in line
    assert "beta's prompts fire alpha (6 of 9 attempts)" in done.stdout


def test_junit_keeps_its_cases_and_adds_routing_properties(routed: tuple[Path, dict[str, Any]]) -> None:
    out, results = routed
    done = run_cli("report", str(out), "--format", "junit")
    assert done.returncode == 0, done.stderr
    root = ET.fromstring(done.stdout)
    assert sum(len(suite.findall("testcase")) for suite in root.iter("testsuite")) == len(results["cases"])
    alpha = next(s for s in root.iter("testsuite") if s.get("name") == "alpha")
    props = {p.get("name"): p.get("value") for p in alpha.iter("property")}
    assert props["routing_precision"] == "0.6000" and props["routing_recall"] == "1.0000"
    assert (props["routing_tp"], props["routing_fp"], props["routing_fn"]) == ("9", "6", "0")
    assert props["routing_attempts"] == "45" and props["routing_excluded_error"] == "3"
    assert props["routing_excluded_unrun"] == "3"
    assert props["routing_top_confusion"] == "beta's prompts fire alpha (6 of 9 attempts)"
    # Still the JUnit the CI reporters read: the Jenkins xUnit plugin's schema.
    from lxml import etree
    schema = etree.XMLSchema(etree.parse(str(Path(__file__).parent / "data" / "junit.xsd")))
    assert schema.validate(etree.fromstring(done.stdout.encode("utf-8"))), schema.error_log


def html_page(out: Path, work: Path) -> Path:
    page = work / "report.html"
    done = run_cli("report", str(out), "--format", "html", "--out", str(page))
    assert done.returncode == 0, done.stderr
    return page


def test_html_heatmap_has_labels_and_counts_and_no_outside_url(routed: tuple[Path, dict[str, Any]],
                                                              tmp_path: Path) -> None:
    out, _ = routed
    text = html_page(out, tmp_path).read_text()
    table = re.search(r'<table id="routing-matrix".*?</table>', text, flags=re.S)
    assert table is not None
    cells = {(m[0], m[1]): int(m[2]) for m in re.findall(
        r'<td class="heat[^"]*" data-expected="([^"]*)" data-fired="([^"]*)"[^>]*>(\d+)</td>', table.group(0))}
    assert {k: v for k, v in cells.items() if v} == {(row, col): n for row, cols in EXPECTED_MATRIX.items()
                                                     for col, n in cols.items()}
    assert "style=" not in table.group(0)  # the CSP allows the page's own stylesheet only: classes, no inline style
    assert "http://" not in text and "https://" not in text


def test_html_heatmap_in_chromium(routed: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    need_chromium()
    out, _ = routed
    page = html_page(out, tmp_path)
    browser = Browser(tmp_path / "profile", page.as_uri(), size=(1280, 900))
    try:
        browser.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        cell = json.loads(browser.js(
            "JSON.stringify((function(){var c=document.querySelector('#routing-matrix td[data-expected=beta]"
            "[data-fired=alpha]');var s=getComputedStyle(c);return {text:c.textContent,bg:s.backgroundColor,"
            "w:c.getBoundingClientRect().width};})())"))
        assert cell["text"] == "6" and cell["w"] > 20
        assert cell["bg"] not in ("rgba(0, 0, 0, 0)", "transparent", "rgb(255, 255, 255)")  # the sheet coloured it
        empty = browser.js("getComputedStyle(document.querySelector('#routing-matrix td[data-expected=eta]"
                           "[data-fired=alpha]')).backgroundColor")
        assert empty != cell["bg"]
        browser.js("document.getElementById('routing').scrollIntoView({block:'start'})")
        shot = tmp_path / "routing.png"
        browser.screenshot(shot)
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        browser.close()


# ---- what moved since the last run ------------------------------------------------------------------------------


def previous_of(out: Path, work: Path) -> Path:
    """The same run as a previous one in which alpha did not yet steal beta-one (beta fired there instead)."""
    results = Results.model_validate_json((out / "results.json").read_text())
    assert results.routing is not None
    before = json.loads(results.routing.model_dump_json())
    before["matrix"]["beta"] = {"alpha": N, "beta": 3 * N}
    before["first_fired"]["beta"] = {"alpha": N, "beta": 2 * N}
    before["confusions"][0].update(attempts=N, first=N, cases=["beta/evals/beta-two"])
    folder = work / "previous"
    folder.mkdir()
    earlier = results.model_copy(update={"finished_at": "2026-01-01T00:00:00+00:00",
                                         "routing": routing.Routing.model_validate(before)})
    (folder / "results.json").write_text(earlier.model_dump_json())
    return folder


def test_moved_cells_since_the_previous_run(routed: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    out, _ = routed
    previous = previous_of(out, tmp_path)
    done = run_cli("report", str(out), "--previous", str(previous), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    changed = done.stdout.split("#### Changed since last run", 1)[1].split("####", 1)[0]
    assert "- routing: alpha now takes 6 of beta's 9 attempts, was 3 of 9" in changed
    assert "- routing: beta now takes 6 of beta's 9 attempts, was 9 of 9" in changed
    page = tmp_path / "moved.html"
    assert run_cli("report", str(out), "--previous", str(previous), "--format", "html", "--out",
                   str(page)).returncode == 0
    text = page.read_text()
    assert 'id="routing-moved"' in text and "alpha now takes 6 of beta&#x27;s 9 attempts, was 3 of 9" in text


def test_merged_shards_give_the_unsharded_matrix(routed: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    """Two shards of the same plan, each run for real and merged: every count of the matrix adds up to the unsharded
    run's, and no shard's `other-shard` attempts are counted as UNRUN in the merge."""
    _, whole = routed
    library = routing_library.make(tmp_path / "library")
    shards = []
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        routing_library.script(fake)
        for index in (1, 2):
            out = tmp_path / f"shard{index}"
            done = skill_evals_run(fake, out, "--host", "api", "--repeats", str(N), "--quorum", "2", "--no-early-stop",
                                   "--shard", f"{index}/2", library=library)
            assert done.returncode == 0, done.stdout + done.stderr
            shards.append(out)
    parts = [results_of(out)["routing"] for out in shards]
    assert all(0 < part["attempts"] < whole["routing"]["attempts"] for part in parts)
    merged_dir = tmp_path / "merged"
    done = run_cli("merge", *map(str, shards), "--out", str(merged_dir))
    assert done.returncode == 0, done.stdout + done.stderr
    merged = results_of(merged_dir)["routing"]
    assert merged == whole["routing"]
