"""A newcomer's first hour (issue 16): the plan and the reports of a first run say what they mean.

Every test runs the real CLI as a separate process (`python -m runner`, what a user runs) on the bundled example
library or the vendored Project Aegis corpus, from a fresh folder (no earlier run beside it, so the cost basis is
the settings' defaults), with no ANTHROPIC_* variable unless the test sets one. Nothing here reaches a network:
a run without a key sends nothing to a model, and the surface audit talks to a capture endpoint on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from runner.core.states import AGAINST
from runner.results.build import CaseResult, Results
from tests.conftest import AEGIS_SKILLS, EXAMPLE, REPO, run_cli
from tests.report_fixtures import activation, assemble, assertion

NO_KEY = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_") and k != "SKILL_EVALS_DISABLED"}
A_KEY = {**NO_KEY, "ANTHROPIC_API_KEY": "sk-never-sent"}  # plan only: nothing is sent with it


def skill_evals(*args: str, env: dict[str, str], cwd: Path, columns: int | None = None) -> subprocess.CompletedProcess:
    env = {**env, "PYTHONPATH": str(REPO)}
    if columns is not None:
        env["COLUMNS"] = str(columns)
    done = run_cli(*args, cwd=cwd, env=env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


def plan_json(library: Path, tmp: Path, *args: str, env: dict[str, str] = A_KEY) -> dict:
    return json.loads(skill_evals("plan", "--library", str(library), "--no-library-validator", "--format", "json",
                                  *args, env=env, cwd=tmp).stdout)


@pytest.fixture(scope="module")
def no_key_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`skill-evals run --library examples/library` without a key: the README's quick start, as a newcomer runs it."""
    tmp = tmp_path_factory.mktemp("first-run")
    out = tmp / "run"
    skill_evals("run", "--library", str(EXAMPLE), "--out", str(out), env=NO_KEY, cwd=tmp)
    return out


def report(run: Path, fmt: str, columns: int = 200) -> str:
    return skill_evals("report", str(run), "--format", fmt, env=NO_KEY, cwd=run.parent, columns=columns).stdout


# ---- 1. a run without a key keeps each case's own reason ------------------------------------------------------

def test_a_no_key_run_keeps_the_plans_own_unrun_reasons(no_key_run: Path) -> None:
    plan = json.loads((no_key_run / "plan.json").read_text())
    results = json.loads((no_key_run / "results.json").read_text())
    own = {c["uid"]: c["unrun_reason"] for c in plan["cases"] if c["unrun_reason"]}
    assert set(own.values()) >= {"manual-only-target", "probe-not-calibrated"}, own  # the example has both
    reasons = {c["uid"]: c["reason"] for c in results["cases"]}
    assert all(c["state"] == "UNRUN" for c in results["cases"])
    # A case that could never run keeps its own reason; every other case is UNRUN because there was no key.
    assert {uid: reasons[uid] for uid in own} == own
    assert {reasons[uid] for uid in reasons if uid not in own} == {"no-credentials"}
    assert results["unrun_by_reason"] == dict(Counter(reasons.values()))
    assert results["counts"]["UNRUN"] == len(results["cases"]) == sum(results["unrun_by_reason"].values())
    assert results["plan"]["unrun_all"] == "no-credentials"  # the run-wide cause, for whoever reads the file
    # Every report says the same per reason.
    for fmt in ("terminal", "markdown", "html", "junit"):
        text = report(no_key_run, fmt)
        for reason in ("manual-only-target", "probe-not-calibrated", "no-credentials"):
            assert reason in text, (fmt, reason)
    junit = report(no_key_run, "junit")
    assert junit.count('message="UNRUN: manual-only-target"') == Counter(own.values())["manual-only-target"]


def test_the_kill_switch_keeps_the_plans_own_unrun_reasons_too(tmp_path: Path) -> None:
    out = tmp_path / "run"
    skill_evals("run", "--library", str(EXAMPLE), "--out", str(out), "--no-library-validator",
                env={**A_KEY, "SKILL_EVALS_DISABLED": "1"}, cwd=tmp_path)
    results = json.loads((out / "results.json").read_text())
    reasons = Counter(c["reason"] for c in results["cases"])
    assert reasons["manual-only-target"] > 0 and reasons["kill-switch"] > 0
    # The subagent-target case: no Agent tool in the default allowlist (runner.plan.planner.subagents_callable).
    assert set(reasons) == {"manual-only-target", "probe-not-calibrated", "subagent-not-callable", "kill-switch"}


# ---- 3. the plan of work is the same with and without a key ----------------------------------------------------

def test_the_plan_without_a_key_says_what_would_be_judged(tmp_path: Path) -> None:
    with_key = plan_json(EXAMPLE, tmp_path, "--no-surface")
    without = plan_json(EXAMPLE, tmp_path, "--no-surface", env=NO_KEY)
    for estimate in (with_key["estimate"], without["estimate"]):
        assert estimate["judge_calls_planned"] > 0
    assert without["estimate"]["judge_calls_planned"] == with_key["estimate"]["judge_calls_planned"]
    assert with_key["estimate"]["judge_calls"] == with_key["estimate"]["judge_calls_planned"]
    assert without["estimate"]["judge_calls"] == 0  # calls that will be made: none without a key
    assert [c["unrun_reason"] for c in without["cases"]] == [c["unrun_reason"] for c in with_key["cases"]]
    planned = with_key["estimate"]["judge_calls_planned"]
    text = skill_evals("plan", "--library", str(EXAMPLE), "--no-library-validator", "--no-surface", env=NO_KEY,
                       cwd=tmp_path).stdout
    judge_line = next(line for line in text.splitlines() if line.startswith("Judge calls:"))
    assert f"{planned:,}" in judge_line and "ANTHROPIC_API_KEY" in judge_line, judge_line
    assert not judge_line.startswith("Judge calls: 0"), judge_line
    keyed = skill_evals("plan", "--library", str(EXAMPLE), "--no-library-validator", "--no-surface", env=A_KEY,
                        cwd=tmp_path).stdout
    assert f"Judge calls: {planned:,} " in keyed


# ---- 4. without the surface audit, the estimate models the host's request -----------------------------------

@pytest.mark.parametrize(("library", "host"), [(EXAMPLE, "claude-code"), (AEGIS_SKILLS, "claude-code"),
                                               (EXAMPLE, "api")], ids=["example", "aegis", "example-api"])
def test_the_no_surface_estimate_is_close_to_the_audited_one(tmp_path: Path, library: Path, host: str) -> None:
    audited = plan_json(library, tmp_path, "--host", host)["estimate"]
    modelled = plan_json(library, tmp_path, "--host", host, "--no-surface")["estimate"]
    assert "surface audit" in audited["token_basis"] and "estimate" not in audited["token_basis"]
    assert "estimate" in modelled["token_basis"] and "no surface audit" in modelled["token_basis"]
    ratio = modelled["expected_usd"] / audited["expected_usd"]
    assert 0.7 <= ratio <= 1.4, (ratio, modelled, audited)
    first = modelled["first_turn_input_tokens"] / audited["first_turn_input_tokens"]
    assert 0.85 <= first <= 1.15, (first, modelled["token_basis"], audited["token_basis"])
    assert modelled["cache_layout"] == audited["cache_layout"]


# ---- 5. versions read as `name version` -------------------------------------------------------------------------

VERSIONS = re.compile(r"claude-code \d+\.\d+\.\d+, claude-agent-sdk \d+\.\d+\.\d+")


def test_versions_are_printed_as_name_and_version(tmp_path: Path, no_key_run: Path) -> None:
    text = skill_evals("plan", "--library", str(EXAMPLE), "--no-library-validator", "--no-surface", env=A_KEY,
                       cwd=tmp_path).stdout
    first = text.splitlines()[0]
    assert VERSIONS.search(first) and "{" not in first and "claude-code-cli" not in first, first
    api = skill_evals("plan", "--library", str(EXAMPLE), "--no-library-validator", "--no-surface", "--host", "api",
                      env=A_KEY, cwd=tmp_path).stdout.splitlines()[0]
    assert re.search(r"anthropic \d+\.\d+", api) and "{" not in api, api
    header = report(no_key_run, "terminal").splitlines()[0]
    assert VERSIONS.search(header) and "{" not in header, header


# ---- 2. the terminal report never cuts a skill name or a case uid -----------------------------------------------

def long_named_results() -> Results:
    """Aegis's longest skill names and case ids, a failing case for each (the case table), every state."""
    names = sorted((p.name for p in AEGIS_SKILLS.iterdir() if (p / "SKILL.md").is_file()), key=len)[-6:]
    cases = []
    for i, name in enumerate(names):
        uid = f"{name}/trigger/metering-rollup-pipeline-goes-to-usage-metering-and-cost-attribution-{i}"
        cases.append(CaseResult(uid=uid, skill=name, kind="discrimination", target=name, state="FAIL", losses=2,
                                repeats_run=2, repeats_planned=3, quorum=2, activation=activation("FAIL", 0, 2),
                                fired_instead={names[0]: 2}, assertions=[assertion(1, "FAIL")]))
        cases.append(CaseResult(uid=f"{name}/evals/positive-{i}", skill=name, kind="trigger", target=name,
                                state="PASS", wins=2, repeats_run=2, repeats_planned=3, quorum=2,
                                activation=activation("PASS", 2, 2)))
        cases.append(CaseResult(uid=f"{name}/evals/manual-{i}", skill=name, kind="trigger", target=name,
                                state="UNRUN", reason="manual-only-target", repeats_planned=3, quorum=2))
    return assemble(cases)


def whole(name: str, text: str) -> bool:
    """`name` appears whole on one line, between cell borders or spaces (never cut, folded or ellipsised)."""
    return re.search(rf"(?:^|[\s│┃|]){re.escape(name)}(?:$|[\s│┃|,:;])", text, re.MULTILINE) is not None


@pytest.mark.parametrize("columns", [80, 60])
def test_the_terminal_report_keeps_every_skill_name_and_uid_whole(tmp_path: Path, no_key_run: Path,
                                                                  columns: int) -> None:
    run = tmp_path / "long"
    run.mkdir()
    (run / "results.json").write_text(long_named_results().model_dump_json(indent=2))
    for folder in (no_key_run, run):
        results = Results.model_validate_json((folder / "results.json").read_text())
        text = report(folder, "terminal", columns=columns)
        assert "…" not in text, text
        for skill in {c.skill for c in results.cases}:
            assert whole(skill, text), (skill, columns, text)
        for case in results.cases:
            if case.state in AGAINST:
                assert whole(case.uid, text), (case.uid, columns, text)
        # The tables keep inside the terminal; only a name longer than the terminal may run past it.
        longest = max(len(c.uid) for c in results.cases)
        assert all(len(line) <= max(columns, longest + 4) for line in text.splitlines() if line[:1] in "┏┃┡│├└"), text


# ---- 6. the example's first real run fits the default cap ---------------------------------------------------------

def test_the_examples_first_run_fits_the_default_cap(tmp_path: Path) -> None:
    plan = plan_json(EXAMPLE, tmp_path)  # with a key, audited, as `run` plans it
    estimate = plan["estimate"]
    assert plan["cap_usd"] == 10.0 and estimate["runnable_cases"] > 0
    assert 0 < estimate["expected_usd"] <= plan["cap_usd"], estimate
    text = skill_evals("plan", "--library", str(EXAMPLE), "--no-library-validator", env=A_KEY, cwd=tmp_path).stdout
    assert "above the cap" not in text
