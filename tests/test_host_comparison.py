"""`run --host a,b,...` (issue 36, item 5): the comparison model from hand-made results (trigger accuracy per skill
per host with its grade, the differing cases), what it means for the check and the action's outputs, every report's
Hosts section, the option's checks; and one run end to end on first-turn and api against the fake Messages API,
where the script answers what only Claude Code's request carries, so one case's verdict differs between the hosts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from rich.console import Console

from runner.core.quorum import wilson_interval
from runner.core.states import CASE_STATES
from runner.publish import rules
from runner.report import host_table as report_hosts
from runner.report import html, junit, markdown, terminal
from runner.results import host_comparison as hosts_mod
from runner.results.build import CaseResult, PlanSummary, Results, Spend
from runner.results.host_comparison import HostAccuracy
from runner.results.verdicts import ActivationResult
from runner.testing.fake_anthropic import FakeAnthropic, dynamic, skill, text
from tests.conftest import REPO, cli, fake_env, run_cli
from tests.helpers import KEY, demo_skill, results_of, skill_evals_run

SCHEMA = json.loads((REPO / "runner" / "schemas" / "results.schema.json").read_text(encoding="utf-8"))


# ---- hand-made results ---------------------------------------------------------------------------------------------

def case(uid: str, kind: str, state: str, wins: int, losses: int, errors: int = 0, skill_name: str = "demo",
         reason: str | None = None) -> CaseResult:
    """A case whose attempts all turned on their activation: `wins` met the expectation (the target fired for a
    trigger case, stayed silent for a no_trigger one), `losses` did not."""
    fired = losses if kind == "no_trigger" else wins
    observed = wins + losses
    activation = ActivationResult(state=state if state in ("PASS", "FAIL") else "UNRUN", fired_runs=fired,
                                  observed_runs=observed, rate=fired / observed if observed else None,
                                  wilson_95=wilson_interval(fired, observed))
    return CaseResult(uid=uid, skill=skill_name, kind=kind, target=skill_name, state=state, wins=wins, losses=losses,
                      errors=errors, repeats_run=wins + losses + errors, repeats_planned=3, quorum=2, reason=reason,
                      activation=activation)


def results_on(host: str, cases: list[CaseResult], spend: float, cap: float = 10.0) -> Results:
    counts = {state: sum(1 for c in cases if c.state == state) for state in CASE_STATES}
    plan = PlanSummary(hash="0" * 16, tier="full", host=host, approximation=None, versions={"host": host},
                       model="claude-sonnet-4-6", repeats=3, quorum=2, cap_usd=cap, library_hash="f" * 64,
                       listing_budget_chars=None, surface=None)
    return Results(finished_at="2026-12-07T10:00:00+00:00", plan=plan, counts=counts, unrun_by_reason={},
                   attempts_finished=sum(c.repeats_run for c in cases), attempts_errored=0, cases=cases,
                   spend=Spend(usd=spend, cap_usd=cap), not_executed="0 case(s) were not executed (UNRUN).")


def two_hosts(second_beta: str = "FAIL", refusal: str = "FAIL") -> Results:
    """claude-code: alpha 3/3, beta 2 of 3, quiet (no_trigger) 2 of 2 and an error, a refusal (its state as given)
    and a quarantined trigger case that count for no trigger figure; api: beta as given (FAIL: 0 of 2), the rest
    the same."""
    first = [case("demo/e/alpha", "trigger", "PASS", 3, 0), case("demo/e/beta", "trigger", "PASS", 2, 1),
             case("demo/e/quiet", "no_trigger", "PASS", 2, 0, errors=1),
             case("demo/e/refuse", "refusal", refusal, 0, 3),
             case("demo/e/held", "trigger", "QUARANTINED", 0, 3),
             case("other/e/one", "trigger", "PASS", 2, 0, skill_name="other")]
    beta = case("demo/e/beta", "trigger", second_beta, *((0, 2) if second_beta == "FAIL" else (2, 1)),
                reason="it did not fire" if second_beta == "FAIL" else None)
    second = [first[0], beta, *first[2:]]
    return hosts_mod.combined([("claude-code", results_on("claude-code", first, 0.25, cap=10.0)),
                               ("api", results_on("api", second, 0.05, cap=9.75))], cap_usd=10.0)


def test_trigger_accuracy_per_skill_per_host_counts_trigger_and_no_trigger_attempts() -> None:
    found = two_hosts().hosts
    assert found is not None
    rows = {row.skill: {a.host: a for a in row.hosts} for row in found.skills}
    assert list(rows) == ["demo", "other"]
    # alpha 3 + beta 2 + quiet 2 of 3 + 1 + 2 trials: the refusal and the quarantined case left out, the error no trial.
    demo = rows["demo"]["claude-code"]
    assert (demo.wins, demo.trials, demo.rate, demo.grade) == (7, 8, 0.875, "tool-event")
    assert demo.interval_95 is not None and demo.interval_95[0] < 0.875 < demo.interval_95[1]
    api = rows["demo"]["api"]
    assert (api.wins, api.trials) == (5, 7)
    assert [h.name for h in found.hosts] == ["claude-code", "api"]
    assert found.hosts[1].results == "hosts/api/results.json" and found.hosts[1].cap_usd == 9.75
    assert found.spend_usd == pytest.approx(0.30) and found.cap_usd == 10.0


def test_the_cases_whose_state_differs_are_listed_with_each_hosts_state() -> None:
    found = two_hosts().hosts
    assert found is not None
    assert [(d.uid, d.skill, d.states, d.reasons) for d in found.differences] == [
        ("demo/e/beta", "demo", {"claude-code": "PASS", "api": "FAIL"}, {"api": "it did not fire"})]
    same = two_hosts(second_beta="PASS").hosts
    assert same is not None and same.differences == []


def test_the_combined_results_are_the_first_hosts_and_match_the_shipped_schema() -> None:
    combined = two_hosts()
    assert combined.plan.host == "claude-code" and combined.spend.usd == 0.25
    data = json.loads(combined.model_dump_json())
    assert not list(Draft202012Validator(SCHEMA).iter_errors(data))
    assert Results.model_validate(data) == combined


def test_a_failure_on_any_host_is_the_checks_conclusion() -> None:
    """The first host passed every case it ran; the second failed one."""
    first = two_hosts(refusal="PASS")
    assert rules.conclusion(first.model_copy(update={"hosts": None}), "required") == "success"
    assert rules.conclusion(first, "required") == "failure"
    assert rules.conclusion(first, "advisory") == "neutral"
    assert rules.conclusion(two_hosts(second_beta="PASS", refusal="PASS"), "required") == "success"
    title = rules.title(first)
    assert "claude-code PASS 5 · FAIL 0" in title and "| api PASS 4 · FAIL 1" in title and "$0.30 of $10.00" in title


def run_lane(tmp_path: Path, run_dir: Path, mode: str) -> dict[str, str]:
    output = tmp_path / "github-output"
    output.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "INPUT_", "RUNNER_"))}
    subprocess.run([sys.executable, str(REPO / "scripts" / "action" / "lane.py"), "outputs"], check=True, timeout=60,
                   env=env | {"GITHUB_OUTPUT": str(output), "RUN_DIR": str(run_dir), "MODE": mode},
                   capture_output=True, text=True)
    return dict(line.split("=", 1) for line in output.read_text(encoding="utf-8").splitlines() if "=" in line)


def test_the_actions_outputs_weigh_every_host(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(two_hosts(refusal="PASS").model_dump_json(), encoding="utf-8")
    required = run_lane(tmp_path, tmp_path, "required")
    assert required["conclusion"] == "failure"  # api's FAIL, though every case of the first host passed
    assert required["fail"] == "1" and required["pass"] == "9" and required["spend-usd"] == "0.3000"
    assert run_lane(tmp_path, tmp_path, "advisory")["conclusion"] == "neutral"


def test_every_report_has_the_hosts_section() -> None:
    combined = two_hosts()
    cell = "0.88 [0.53, 0.98] n=8"
    assert report_hosts.cell(combined.hosts.skills[0].hosts[0]) == cell  # type: ignore[union-attr]
    page = markdown.render(combined)
    assert "### Hosts" in page and "claude-code (tool-event)" in page and cell.replace("[", "&#91;").replace(
        "]", "&#93;") in page and "demo/e/beta (demo): claude-code PASS · api FAIL (it did not fire)" in page
    console = Console(record=True, width=160)
    terminal.render(combined, console)
    shown = console.export_text()
    assert "Hosts" in shown and cell in shown and "claude-code PASS · api FAIL" in shown
    assert 'id="hosts"' in html.render(combined) and cell in html.render(combined)
    root = ET.fromstring(junit.render(combined))
    demo = next(s for s in root.iter("testsuite") if s.get("name") == "demo")
    props = {p.get("name"): p.get("value") for p in demo.iter("property")}
    assert props["host_api"].startswith("api") and props["trigger_accuracy_claude-code"] == cell
    elsewhere = [t for t in demo.iter("testcase") if t.get("name") == "demo/e/beta [api]"]
    assert len(elsewhere) == 1 and elsewhere[0].find("failure") is not None
    assert demo.get("failures") == str(1 + 1)  # the refusal on claude-code, beta on api
    from lxml import etree  # the `test` extra: the document is still valid JUnit (tests/data/junit.xsd)
    schema = etree.XMLSchema(etree.parse(str(REPO / "tests" / "data" / "junit.xsd")))
    assert schema.validate(etree.fromstring(junit.render(combined).encode("utf-8"))), schema.error_log


def test_a_grade_other_than_tool_event_is_marked_in_its_cell() -> None:
    read = HostAccuracy(host="reader", wins=2, trials=3, rate=0.6667, interval_95=(0.2077, 0.9385), grade="file-read")
    assert report_hosts.cell(read) == "0.67 [0.21, 0.94] n=3 (file-read)"
    blind = HostAccuracy(host="blind", wins=0, trials=0, rate=None, interval_95=None, grade="none")
    assert report_hosts.cell(blind) == "— (none)"


@pytest.mark.parametrize(("given", "says"), [("api,nowhere", "'nowhere' is no host"),
                                             ("api,api", "api named twice")])
def test_the_host_list_is_checked_before_anything_runs(given: str, says: str) -> None:
    done = cli("plan", "--library", str(REPO / "examples" / "library"), "--no-surface", "--host", given)
    assert done.exit_code == 2 and says in done.output


def test_several_hosts_take_no_shard() -> None:
    done = cli("plan", "--library", str(REPO / "examples" / "library"), "--no-surface", "--host", "api,first-turn",
               "--shard", "1/2")
    assert done.exit_code == 2 and "--shard runs one host's plan" in done.output


# ---- end to end: first-turn and api against the fake ----------------------------------------------------------------

def from_claude_code(body: dict[str, Any]) -> bool:
    """What only Claude Code's request carries (first-turn sends it as captured): its SDK's system block."""
    system = body.get("system")
    blocks = system if isinstance(system, list) else [{"text": system or ""}]
    return any("Claude Agent SDK" in str(block.get("text", "")) for block in blocks if isinstance(block, dict))


def scripted(always: bool) -> Any:
    def turn(body: dict[str, Any]) -> Any:
        if any(m.get("role") == "assistant" for m in body.get("messages") or [] if isinstance(m, dict)):
            return text("The demo report, in one line.")
        return skill("demo") if always or from_claude_code(body) else text("A summary without the skill.")
    return dynamic(turn)


def test_run_on_two_hosts_writes_each_run_and_the_comparison(tmp_path: Path) -> None:
    library = demo_skill(tmp_path / "library", [
        {"id": name, "type": "should_trigger", "prompt": f"[{name}] summarise the demo report please.",
         "expect": {"triggers": True, "assertions": ["The demo skill activates."]}} for name in ("alpha", "beta")])
    (library / ".skill-evals.toml").write_text("[run]\nconcurrency = 1\n", encoding="utf-8")
    out = tmp_path / "out"
    with FakeAnthropic() as fake:
        fake.script("[alpha]", scripted(True), scripted(True))
        fake.script("[beta]", scripted(False), scripted(False))
        done = skill_evals_run(fake, out, "--host", "first-turn,api", library=library)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "each later host gets the cap minus what the hosts before it spent" in done.stdout
    top = results_of(out)
    first, second = results_of(out / "hosts" / "first-turn"), results_of(out / "hosts" / "api")
    assert (out / "hosts" / "api" / "plan.json").is_file() and top["plan"] == first["plan"]
    states = {h: {c["uid"].rsplit("/", 1)[1]: c["state"] for c in r["cases"]} for h, r in (("first-turn", first),
                                                                                            ("api", second))}
    assert states == {"first-turn": {"alpha": "PASS", "beta": "PASS"}, "api": {"alpha": "PASS", "beta": "FAIL"}}
    hosts = top["hosts"]
    assert [h["name"] for h in hosts["hosts"]] == ["first-turn", "api"]
    assert all(h["activation_grade"] == "tool-event" for h in hosts["hosts"])
    spent_first = first["spend"]["usd"] + first["spend"]["lost_in_flight_usd"]
    assert spent_first > 0 and second["spend"]["cap_usd"] == pytest.approx(10.0 - spent_first, abs=1e-6)
    assert hosts["spend_usd"] == pytest.approx(spent_first + second["spend"]["usd"], abs=1e-6)
    [row] = hosts["skills"]
    cells = {a["host"]: (a["wins"], a["trials"]) for a in row["hosts"]}
    assert cells == {"first-turn": (4, 4), "api": (2, 4)}
    assert [(d["uid"].rsplit("/", 1)[1], d["states"]) for d in hosts["differences"]] == [
        ("beta", {"first-turn": "PASS", "api": "FAIL"})]
    report = run_cli("report", str(out), "--format", "markdown")
    assert report.returncode == 0 and "### Hosts" in report.stdout and "api FAIL" in report.stdout
    # The first host's own folder is a run like any other: its report has no comparison.
    alone = run_cli("report", str(out / "hosts" / "first-turn"), "--format", "markdown")
    assert alone.returncode == 0 and "### Hosts" not in alone.stdout
    # Resuming the comparison resumes each host's folder (nothing is left to run here) and writes it again.
    before = (out / "results.json").stat().st_mtime_ns
    with FakeAnthropic() as fake:
        again = run_cli("run", "--resume", str(out), env=fake_env(fake, KEY))
    assert again.returncode == 0, again.stdout + again.stderr
    assert fake.message_requests == [] and (out / "results.json").stat().st_mtime_ns > before
    assert results_of(out)["hosts"]["differences"] == hosts["differences"]

    # A later host whose sessions no longer fit what the earlier one left is cut as any run is: UNRUN budget-cap.
    cut = tmp_path / "cut"
    with FakeAnthropic() as fake:
        fake.script("[alpha]", scripted(True), scripted(True))
        fake.script("[beta]", scripted(False), scripted(False))
        done = skill_evals_run(fake, cut, "--host", "api,first-turn", "--max-usd", "2", library=library)
    assert done.returncode == 0, done.stdout + done.stderr
    plans = {h: json.loads((cut / "hosts" / h / "plan.json").read_text()) for h in ("api", "first-turn")}
    later = plans["first-turn"]
    assert plans["api"]["estimate"]["worst_session_usd"] < 2
    assert later["cap_usd"] < 2 < later["estimate"]["worst_session_usd"]  # what api left: no session fits
    skipped = results_of(cut / "hosts" / "first-turn")
    assert skipped["counts"]["UNRUN"] == 2 and skipped["unrun_by_reason"] == {"budget-cap": 2}
    top = results_of(cut)["hosts"]
    assert {d["states"]["first-turn"] for d in top["differences"]} == {"UNRUN"}
    assert top["hosts"][1]["stop_reason"] == "budget-cap"


def test_the_plan_shows_each_host_and_the_hosts_against_the_one_cap(tmp_path: Path) -> None:
    library = str(demo_skill(tmp_path / "library", [
        {"id": "alpha", "type": "should_trigger", "prompt": "Summarise the demo report please.",
         "expect": {"triggers": True, "assertions": ["The demo skill activates."]}}]))
    done = cli("plan", "--library", library, "--no-surface", "--host", "api,first-turn", "--max-usd", "3")
    assert done.exit_code == 0, done.output
    assert "Host 1 of 2: api" in done.output and "Host 2 of 2: first-turn; its cap is what the hosts before it " \
        "leave of $3.00" in done.output
    assert "against the cap of $3.00 for the whole run: each later host gets the cap minus what the hosts before " \
           "it spent" in done.output
    as_json = cli("plan", "--library", library, "--no-surface", "--host", "api,first-turn", "--format", "json")
    plans = json.loads(as_json.output)["hosts"]
    assert list(plans) == ["api", "first-turn"] and plans["first-turn"]["host"] == "first-turn"


def test_trigger_accuracy_reads_the_activation_not_the_answers_verdict() -> None:
    """A trigger case whose skill fired every time but whose answer an assertion failed is FAIL, yet its activation
    met the expectation: the accuracy counts it fired."""
    fired_but_wrong = case("demo/evals/fired-wrong-answer", "trigger", "FAIL", wins=3, losses=0)
    fired_but_wrong = fired_but_wrong.model_copy(update={"wins": 0, "losses": 3})  # the attempts' overall states
    silent = case("demo/evals/quiet", "no_trigger", "PASS", wins=2, losses=1)
    found = hosts_mod.accuracy("claude-code", [fired_but_wrong, silent])
    assert (found.wins, found.trials) == (5, 6)
