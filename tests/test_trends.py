"""Trends across runs (issue 19 §3): per-skill trigger accuracy and pass rate as inline SVG in the HTML page,
and the "Changed since last run" list in the Markdown rollup, from `report --previous` or `report --history`."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

from runner.report.history import compare
from runner.results.build import CaseResult, Results
from tests.browser import Browser, need_chromium
from tests.conftest import run_cli
from tests.report_fixtures import activation, assemble, every_state

SHOULD_NOT_MERGE = "alpha/evals/should-not-merge"
POSITIVE_OK = "alpha/evals/positive-ok"


def _with(results: Results, finished_at: str, changes: dict[str, dict]) -> Results:
    cases: list[CaseResult] = [c.model_copy(update=changes.get(c.uid, {})) for c in results.cases]
    return assemble(cases).model_copy(update={"finished_at": finished_at})


def three_runs() -> list[Results]:
    """alpha, oldest → newest: trigger 1/2, 2/2, 2/2; pass rate 0/3, 1/3, 2/3 (beta: its quarantined case and
    errors are left out: nothing decided; trigger 0/0)."""
    base = every_state()
    oldest = _with(base, "2026-11-28T12:00:00+00:00",
                   {POSITIVE_OK: {"state": "FAIL", "activation": activation("FAIL", 0, 2)}})
    middle = _with(base, "2026-11-29T12:00:00+00:00", {})
    current = _with(base, "2026-11-30T12:00:00+00:00", {SHOULD_NOT_MERGE: {"state": "PASS"}})
    return [oldest, middle, current]


def write_runs(tmp_path: Path) -> tuple[Path, Path]:
    oldest, middle, current = three_runs()
    history = tmp_path / "history"
    for name, run in (("run-a", middle), ("run-b", oldest)):  # folder names in another order than time
        (history / name).mkdir(parents=True)
        (history / name / "results.json").write_text(run.model_dump_json())
    (tmp_path / "current").mkdir()
    (tmp_path / "current" / "results.json").write_text(current.model_dump_json())
    return history, tmp_path / "current"


def svgs(page: str) -> dict[tuple[str, str], ET.Element]:
    """Each trend chart by (skill, metric), parsed as XML."""
    out = {}
    for row in re.findall(r'<tr data-skill="([^"]*)">(.*?)</tr>', page, flags=re.S):
        for svg in re.findall(r'<svg class="trend".*?</svg>', row[1], flags=re.S):
            element = ET.fromstring(svg)
            out[(row[0], element.get("data-metric") or "")] = element
    return out


def values(svg: ET.Element) -> list[float | None]:
    return [float(c.get("data-value")) if c.get("data-value") else None for c in svg.iter("circle")]


def test_trends_follow_the_definitions() -> None:
    oldest, middle, current = three_runs()
    history = compare(current, [middle, oldest], labels=["m", "o"])
    alpha = next(t for t in history.trends if t.skill == "alpha")
    assert [p.run for p in alpha.points] == ["o", "m", "current"]
    assert [(p.trigger_wins, p.trigger_run) for p in alpha.points] == [(1, 2), (2, 2), (2, 2)]
    assert [(p.passed, p.decided) for p in alpha.points] == [(0, 3), (1, 3), (2, 3)]
    beta = next(t for t in history.trends if t.skill == "beta")
    assert all(p.pass_rate is None for p in beta.points)


def test_html_draws_one_point_per_run_with_no_external_url(tmp_path: Path) -> None:
    history, current = write_runs(tmp_path)
    out = tmp_path / "report.html"
    done = run_cli("report", str(current), "--history", str(history), "--format", "html", "--out", str(out))
    assert done.returncode == 0, done.stderr
    page = out.read_text()
    charts = svgs(page)
    assert values(charts[("alpha", "trigger_accuracy")]) == [0.5, 1.0, 1.0]
    assert values(charts[("alpha", "pass_rate")]) == [0.0, 0.3333, 0.6667]
    assert values(charts[("beta", "pass_rate")]) == [None, None, None]  # a hollow mark per run, no line
    assert all(len(list(svg.iter("circle"))) == 3 for svg in charts.values())
    runs = [c.get("data-run") for c in charts[("alpha", "pass_rate")].iter("circle")]
    assert runs == [str(history / "run-b"), str(history / "run-a"), str(current)]
    # Higher values are drawn higher (smaller y).
    ys = [float(c.get("cy") or 0) for c in charts[("alpha", "pass_rate")].iter("circle")]
    assert ys[0] > ys[1] > ys[2]
    assert not re.search(r"(?i)(src|href|xlink:href)\s*=\s*[\"']?\s*(https?:)?//", page)
    assert "http://" not in page and "https://" not in page


def test_markdown_lists_what_changed_since_the_last_run(tmp_path: Path) -> None:
    history, current = write_runs(tmp_path)
    done = run_cli("report", str(current), "--previous", str(history / "run-b"), str(history / "run-a"),
                   "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    section = text.split("#### Changed since last run", 1)[1].split("####", 1)[0]
    assert f"({history / 'run-a'})" in section.splitlines()[0]
    assert f"- {SHOULD_NOT_MERGE}: FAIL → PASS" in section
    assert "- skill alpha: pass rate 1/3 → 2/3" in section
    assert POSITIVE_OK not in section and "trigger accuracy" not in section  # unchanged since run-a
    # Right after the state counts, before the per-skill table.
    assert text.index("#### Changed since last run") < text.index("| Skill |")


def test_trend_charts_in_chromium(tmp_path: Path) -> None:
    need_chromium()
    history, current = write_runs(tmp_path)
    out = tmp_path / "report.html"
    assert run_cli("report", str(current), "--history", str(history), "--format", "html", "--out",
                   str(out)).returncode == 0
    browser = Browser(tmp_path / "profile", out.as_uri())
    try:
        browser.wait_for("document.documentElement.getAttribute('data-ready') === '1'")
        box = browser.js("JSON.stringify(document.querySelector('#trends svg.trend').getBoundingClientRect())")
        assert '"width":180' in box, box  # drawn inline, at its size (the CSP allows no outside image)
        browser.screenshot(tmp_path / "trends.png")
    finally:
        browser.close()
