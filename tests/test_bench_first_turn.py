"""benchmarks/first_turn.py --short still runs every row (real skill-evals runs, bare `claude -p` sessions and
skill-creator's run_eval method against the fake Messages API) and its verdicts are right: the trigger set's cases
match should_trigger, deciding early changes no verdict, a scripted 500 makes a case ERROR, never PASS, and run_eval
decides as that script does. No figure of time or CPU is asserted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from runner.core.host_traits import HOST_NAMES
from tests.conftest import REPO

BARE = "bare claude -p"
SKILL_CREATOR = "skill-creator run_eval"
COLD, WARM = "claude-code after, cold result cache", "claude-code after, warm result cache"
ROWS = ("claude-code before", "claude-code after", BARE, SKILL_CREATOR, COLD, WARM)
FAULT = "claude-code after, 500 on should-not"
HAND_OFF = "first-turn, one query reads a file first"


def test_first_turn_short_mode_has_every_row_and_the_verdicts_match(tmp_path: Path) -> None:
    out, md = tmp_path / "first_turn.json", tmp_path / "first_turn.md"
    done = subprocess.run([sys.executable, "-m", "benchmarks.first_turn", "--short", "--out", str(out), "--md", str(md)],
                          cwd=REPO, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(out.read_text())
    assert report["benchmark"] == "first_turn" and report["short"] is True
    rows = {r["row"]: r for r in report["rows"]}
    expected = {*ROWS, FAULT} | ({"first-turn", HAND_OFF} if "first-turn" in HOST_NAMES else set())
    assert set(rows) == expected
    assert bool(report["skipped"]) == ("first-turn" not in HOST_NAMES)
    table = md.read_text()
    for name in expected:
        assert f"| {name} | " in table

    for name in expected - {BARE, FAULT, HAND_OFF, SKILL_CREATOR, WARM}:
        row = rows[name]
        assert row["sessions"] == 4 and row["errored"] == 0, row
        assert row["matching"] == row["cases"] == 4 and row["verdicts"] == {"PASS": 4, "FAIL": 0, "ERROR": 0}
        assert row["states"] == rows["claude-code before"]["states"]  # deciding early changes no verdict
        assert row["requests_per_session"] >= 1 and row["input_tokens_per_session"] > 0
    # Deciding early: the two sessions that call the skill stop after that one request.
    assert rows["claude-code after"]["decided_early"] == 2 and rows["claude-code before"]["decided_early"] == 0
    assert rows[BARE]["sessions"] == 4 and rows[BARE]["errored"] == 0 and rows[BARE]["requests_per_session"] == 1
    assert rows[BARE]["input_tokens_per_session"] > 0

    # run_eval counts a query as triggered only when the model names the script's temporary command; the keyword
    # model calls the skill the project has installed, by its own name. So every run of the two should queries is
    # "not triggered" (FAIL), and the two others PASS: one request per session, each CLI killed after its first turn.
    creator = rows[SKILL_CREATOR]
    assert creator["sessions"] == 4 and creator["requests_per_session"] == 1 and creator["errored"] == 0, creator
    assert sorted(creator["triggered"].values()) == [0, 0, 0, 0]
    assert creator["verdicts"] == {"PASS": 2, "FAIL": 2, "ERROR": 0} and creator["matching"] == 2
    assert creator["states"] == {f"invoice-scanner/trigger/q{n}": s
                                 for n, s in enumerate(("FAIL", "FAIL", "PASS", "PASS"), 1)}
    assert creator["cpu_s"] > 0 and creator["one_session_cpu_s"] > 0
    compared = [t for t in report["targets"] if "skill-creator" in t["target"]]  # its CPU and wall: no figure asserted
    assert len(compared) == 5
    # The result cache (issue 33): the second run of the same set with the same cache starts no session, sends no
    # request, takes every attempt from the first and gives its verdicts.
    warm = rows[WARM]
    assert warm["sessions"] == 0 and warm["requests"] == 0 and warm["reused"] == 4, warm
    assert warm["states"] == rows[COLD]["states"] == rows["claude-code before"]["states"]
    assert rows[COLD]["reused"] == 0
    met = {t["target"]: t["met"] for t in report["targets"]}
    assert met["c=2 warm result cache: no session, no request, the cold run's verdicts"] is True
    assert all(t["met"] for t in report["targets"] if "every verdict right" in t["target"])

    fault = rows[FAULT]
    assert fault["should_not_states"] == ["ERROR"] and fault["verdicts"] == {"PASS": 2, "FAIL": 0, "ERROR": 2}
    assert all(t["met"] for t in report["targets"] if "faults" in t["target"])
    assert {"nproc", "cli_version"} <= set(report["machine"])
    if HAND_OFF in rows:  # the read-first query: its attempt went to a real Claude Code session and was counted
        hand_off = rows[HAND_OFF]
        assert hand_off["first_turn_outcomes"] == {"handed-off": 1, "decided": 3}
        assert hand_off["matching"] == hand_off["cases"] == 4 and hand_off["errored"] == 0
        assert all(t["met"] for t in report["targets"] if "handed off" in t["target"])
