"""The first real user at work: Project Aegis, three skills with their neighbours, the real CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runner.corpus.library import is_subagent, subagent_name
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.plan.select import select
from runner.testing.fake_anthropic import FakeAnthropic, skill, text, tool
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests.helpers import KEY, results_of

SKILLS = ("agent-failure-recovery", "agent-instruction-consolidator", "docs-first-implementer")


def surface(library: Path, *extra: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "runner", "surface", "--library", str(library), "--format", "json",
                           *extra], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_surface_audit_default_and_raised_budget(aegis_skills: Path) -> None:
    default = surface(aegis_skills)
    raised = surface(aegis_skills, "--listing-budget", "250000")
    listed = 185 - 18  # manual-only skills are not listed
    # host-surface.md: at the default budget most of the library loses its description...
    assert len(default["name_only"]) > 100
    assert len(default["with_description"]) + len(default["name_only"]) == listed
    # ...and a raised budget keeps every description.
    assert raised["name_only"] == [] and len(raised["with_description"]) == listed
    assert default["missing"] == raised["missing"] == []
    assert raised["listing_chars"] > 150_000 > default["listing_chars"]


def test_three_skills_with_neighbours_on_the_real_cli(aegis_skills: Path, tmp_path: Path) -> None:
    library, _ = load_library(aegis_skills, Settings())
    selected, _ = select(library, list(SKILLS), [], True)
    manual = {name for name, s in library.skills.items() if s.manual_only}
    expected_activation: dict[str, str] = {}
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.default(text("A plain answer."))
        for case, _ in selected:
            key = case.prompt[:80]
            if case.kind in ("trigger", "refusal"):
                fake.script(key, skill(case.target), text("Done."))
                expected_activation[case.uid] = "PASS"
            elif case.kind == "discrimination" and is_subagent(case.target):
                # The default allowlist offers no Agent tool: the CLI refuses the call, no subagent runs, and a
                # refused call is no activation (runner.hosts.activation, issue 17). None of the three skills'
                # cases has a subagent target today; tests/test_activation_recogniser.py runs this path.
                fake.script(key, tool("Agent", {"subagent_type": subagent_name(case.target), "description": "review",
                                                "prompt": case.prompt}), text("Delegated."))
                expected_activation[case.uid] = "FAIL"
            elif case.kind == "discrimination":
                fake.script(key, skill(case.target), text("Done."))
                expected_activation[case.uid] = "PASS"
            elif case.kind == "no_trigger":
                # The file's own skill fires where it should not: a real failure, shown as FAIL.
                fake.script(key, skill(case.target), text("Oops."))
                expected_activation[case.uid] = "FAIL"
        out = tmp_path / "run"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "ANTHROPIC_BASE_URL": fake.url,
               "ANTHROPIC_API_KEY": KEY, "CI": "true"}
        args = [sys.executable, "-m", "runner", "run", "--library", str(aegis_skills), "--out", str(out),
                "--repeats", "3", "--quorum", "2", "--concurrency", "4", "--timeout", "60", "--max-usd", "500"]
        for name in SKILLS:
            args += ["--skill", name]
        done = subprocess.run([*args, "--neighbours"], env=env, capture_output=True, text=True, timeout=1200,
                              check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = results_of(out)
    by_uid = {c["uid"]: c for c in results["cases"]}
    assert set(by_uid) == {case.uid for case, _ in selected}
    assert results["counts"]["ERROR"] == 0
    for case, _ in selected:
        result = by_uid[case.uid]
        if case.target in manual:
            assert (result["state"], result["reason"]) == ("UNRUN", "manual-only-target")
            continue
        assert result["activation"]["state"] == expected_activation[case.uid], case.uid
        if expected_activation[case.uid] == "FAIL":
            assert result["state"] == "FAIL"
        else:
            # Decided by k=2 wins: activation by the harness, prose by the judge (scripted to PASS here).
            assert result["state"] == "PASS" and result["repeats_run"] == 2, result
    assert results["plan"]["surface"]["name_only"], "the default budget drops descriptions"
    assert results["spend"]["usd"] <= results["spend"]["cap_usd"]


def test_calibrating_a_probe_in_the_full_aegis_library(aegis_skills: Path, tmp_path: Path) -> None:
    """All 185 folders in the session; the control arm's listing (raised budget, every description kept)
    has every listable skill but the one under test, the treatment arm's has it too."""
    import shutil

    from runner.testing.fake_anthropic import first_user_text
    from tests.helpers import judge_queue

    repo = tmp_path / "aegis"
    shutil.copytree(aegis_skills.parent, repo / ".claude", symlinks=True)  # skills and agents
    probe_src = Path(__file__).parent / "data" / "aegis-probes" / "release-readiness-reviewer"
    for probe in probe_src.iterdir():
        shutil.copytree(probe, repo / ".claude" / "skills" / "release-readiness-reviewer" / "evals" / "probes" /
                        probe.name)
    (repo / ".skill-evals.toml").write_text("[listing]\nbudget_chars = 250000\n[run]\nhost_max_retries = 0\n")
    entry = "- release-readiness-reviewer: "
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, judge_queue("PASS"))
        fake.script(entry, skill("release-readiness-reviewer"),
                    text("NO-GO: CI ran on 4e1d9a0, not on the release commit 7c03b55; run CI on 7c03b55."))
        fake.script("Dana is pushing v5.2.0", text("GO: every dimension is ok."))
        env = {"PATH": "/usr/bin:/bin", "ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true"}
        done = subprocess.run([sys.executable, "-m", "runner", "calibrate", "--library", str(repo), "--all"],
                              env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr + done.stdout
        sessions = [r for r in fake.message_requests if "<rubric>" not in first_user_text(r.body)
                    and not any(m.get("role") == "assistant" for m in r.body["messages"])]
    control = [r for r in sessions if entry not in first_user_text(r.body)]
    treatment = [r for r in sessions if entry in first_user_text(r.body)]
    assert len(control) == 2 and len(treatment) == 2
    listed = 185 - 1 - 18  # without _template and the manual-only skills
    assert first_user_text(treatment[0].body).count("\n- ") >= listed
    assert all("- code-reviewer: " in first_user_text(r.body) for r in control)
    record = json.loads((repo / ".claude" / "skills" / "release-readiness-reviewer" / "evals" / "probes" /
                         "v5-2-0-green-on-the-branch" / "calibration.json").read_text())["records"][0]
    assert record["verdict"] == "window" and len(record["starts"]) == 4
    assert [s["skill_fired"] for s in record["starts"] if s["arm"] == "treatment"] == [True, True]
