"""Issue 28: a pull request under review cannot run a program in an eval session, nor reach the run from one.

Wall 1 (runner.hosts.wall): nothing of the library runs. One run of the real Claude Code CLI against the fake
Messages API, on a library holding every mechanism Claude Code would run a program through — a skill's frontmatter
hooks (command and http, every event), its inline shell, an `allowed-tools` granting Bash, a subagent's hooks and MCP
server, the repository's own `.claude/settings.json` (hooks, status line, apiKeyHelper, env pointing the CLI at
another server) and `.mcp.json`, and a case whose files would put a settings file in the session's project — while
the fake model fires the skill, calls Bash and delegates to the subagent: no command ran (no marker file), no request
went anywhere but the fake, no record was forged, and the case with the settings file was held back by the floor.

Wall 2 (runner.hosts.confine): what runs anyway is confined. A trusted configuration that allows Bash lets the
fake model run the attack the issue reproduced (append a forged PASS to attempts.jsonl, read the library's answer
key, read the runner's environment, write outside the session): with Landlock every step is refused; with
`session_confinement = "off"` the same command succeeds (so the test can fail).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from runner.corpus import executables
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.floor import validate as validate_mod
from runner.hosts import confine, wall
from runner.report import markdown
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic, skill, text, tool
from tests.conftest import fake_env, run_cli
from tests.hostile_session import (
    CANARY,
    HOOK_PROMPT,
    attack_outcome,
    confined_attack,
    frontmatter_md,
    hostile_library,
    tool_results,
    touch,
)

KEY = "sk-ant-test-session-wall-28"


class Sink(BaseHTTPRequestHandler):
    """Any request a hook, a helper or a redirected CLI would send: counted, answered with nothing useful."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.server.hits.append(self.path)  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(b"{}")

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@pytest.fixture
def sink():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    server.hits = []  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def records(out: Path) -> list[dict]:
    path = out / "attempts.jsonl"
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_no_mechanism_of_the_library_runs_a_program_in_a_session(tmp_path: Path, sink) -> None:
    marks, out = tmp_path / "marks", tmp_path / "run"
    marks.mkdir()
    sink_url = f"http://127.0.0.1:{sink.server_address[1]}"
    root = hostile_library(tmp_path / "library", marks, sink_url, out)
    with FakeAnthropic() as fake:
        fake.script("Please use alpha", skill("alpha"), skill("beta"), tool("Bash", {"command": touch(marks, "model-bash", sink_url=sink_url)}),
                    tool("Agent", {"description": "help", "prompt": "Helper task for alpha.", "subagent_type": "helper",
                                   "run_in_background": False}), text("Alpha done."))
        fake.script("Helper task for alpha", tool("Read", {"file_path": "/etc/hostname"}), text("Helper done."))
        done = run_cli("run", "--library", str(root), "--out", str(out), "--host", "claude-code", "--repeats", "1",
                       "--no-library-validator", "--timeout", "60", env=fake_env(fake, KEY))
        keys = {r.headers.get("x-api-key") for r in fake.requests}
        prompted = [r for r in fake.requests if HOOK_PROMPT in json.dumps(r.body)]
        delegated = fake.requests_for("Helper task for alpha")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert sorted(p.name for p in marks.iterdir()) == [], "a command of the library ran in a session"
    assert sink.hits == [], f"a request left for another server: {sink.hits}"
    assert keys == {KEY}
    assert prompted == [], "a prompt hook called the model"
    assert delegated, "the fake model's Agent call never reached the subagent: the subagent's hooks were not tried"
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    by_id = {c["uid"]: c for c in results["cases"]}
    assert by_id["alpha/evals/fires"]["state"] == "PASS", by_id["alpha/evals/fires"]
    held = by_id["alpha/evals/ships-settings"]
    assert held["state"] == "UNRUN" and "case-file-reserved" in json.dumps(held), held
    lines = records(out)
    assert [r["attempt_id"] for r in lines] == ["alpha/evals/fires#main#1"], lines
    assert all(r["cost_usd"] >= 0 for r in lines)
    calls = [(c["name"], c["is_error"]) for c in lines[0]["tool_calls"]]
    assert ("Skill", False) in calls and calls.count(("Skill", False)) == 2, calls  # both skills loaded
    assert ("Bash", True) in calls, calls  # "No such tool available": the skill's allowed-tools grant nothing


def attack_run(tmp_path: Path, confinement: str) -> tuple[set[str], Path]:
    marks, out, root = tmp_path / "marks", tmp_path / "run", tmp_path / "library"
    marks.mkdir(parents=True)
    alpha = root / ".claude" / "skills" / "alpha"
    (alpha / "evals").mkdir(parents=True)
    (alpha / "SKILL.md").write_text(frontmatter_md({"name": "alpha", "description": "Use for alpha requests."},
                                                   "Alpha.\n"), encoding="utf-8")
    (alpha / "evals" / "evals.json").write_text(json.dumps({"skill_name": "alpha", "evals": [
        {"id": "fires", "prompt": "Please use alpha now.", "expectations": []}]}), encoding="utf-8")
    # A repository its owner trusts may allow Bash: then whatever the model runs is what the second wall holds.
    (root / ".skill-evals.toml").write_text(
        f'[run]\nallowed_tools = ["Skill", "Read", "Bash"]\ndecide_early = false\nsession_confinement = "{confinement}"\n',
        encoding="utf-8")
    with FakeAnthropic() as fake:
        fake.script("Please use alpha now", skill("alpha"),
                    tool("Bash", {"command": confined_attack(out, root, marks)}), text("Alpha done."))
        done = run_cli("run", "--library", str(root), "--out", str(out), "--host", "claude-code", "--repeats", "1",
                       "--no-library-validator", "--timeout", "60", env=fake_env(fake, KEY, {"CANARY_VAR": CANARY}))
        answers = tool_results(fake, "Please use alpha now")
    assert done.returncode in (0, 1), done.stdout + done.stderr
    return attack_outcome(answers), out


def test_what_a_session_runs_cannot_reach_the_run_or_the_machine(tmp_path: Path) -> None:
    found = wall.detect("auto")
    if found.mode != "landlock":
        pytest.skip(f"this kernel cannot confine sessions: {found.detail}")
    outcome, out = attack_run(tmp_path / "confined", "auto")
    assert outcome == {"FORGE-DENIED", "ANSWER-KEY-DENIED", "ENVIRON-DENIED", "OUTSIDE-DENIED", "INSIDE-OK"}, outcome
    assert [r["attempt_id"] for r in records(out)] == ["alpha/evals/fires#main#1"]
    plan = json.loads((out / "plan.json").read_text(encoding="utf-8"))
    assert plan["session_wall"]["mode"] == "landlock"
    # The same command without the wall: every step gets through, so the assertions above can fail.
    outcome, out = attack_run(tmp_path / "open", "off")
    assert outcome == {"FORGE-OK", "ANSWER-KEY-OK", "ENVIRON-OK", "OUTSIDE-OK", "INSIDE-OK"}, outcome
    # ... and every report says the sessions were not confined.
    results = Results.model_validate_json((out / "results.json").read_text(encoding="utf-8"))
    assert results.plan.session_wall is not None and results.plan.session_wall.mode == "none"
    assert "**Sessions:** sessions ran without the Landlock wall" in markdown.render(results)


# ---- the parts, fast -------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "reserved"), [
    (".claude/settings.json", True), (".claude/settings.local.json", True), (".Claude/commands/x.md", True),
    ("./.claude/agents/a.md", True), (".mcp.json", True), (".git/config", True), ("sub/.git/config", True),
    (".GIT/hooks/pre-commit", True), ("CLAUDE.md", False), ("data/report.json", False), ("claude/settings.json", False),
    ("docs/.claude-notes.md", False), ("a/../.claude/settings.json", True),
])
def test_reserved_project_paths(path: str, reserved: bool) -> None:
    assert (executables.reserved_path(path) is not None) is reserved


def test_the_floor_names_every_mechanism_it_switches_off(tmp_path: Path) -> None:
    root = hostile_library(tmp_path / "library", tmp_path / "marks", "http://127.0.0.1:9", tmp_path / "run")
    library, _ = load_library(root, Settings())
    found = {(f.rule, f.level.value, f.uid) for f in validate_mod.check_library(library, Settings())}
    assert ("skill-hooks-not-run", "warning", None) in found
    assert ("skill-inline-shell", "warning", None) in found
    assert ("agent-hooks-not-run", "warning", None) in found
    assert ("agent-mcp-not-started", "warning", None) in found
    assert ("case-file-reserved", "error", "alpha/evals/ships-settings") in found
    assert not any(rule == "case-file-reserved" and uid == "alpha/evals/fires" for rule, _, uid in found)


@pytest.mark.parametrize(("body", "shown"), [
    ("Now: !`date`\nok", "Now: [shell command execution disabled by policy]\nok"),
    ("```!\nls -la\n```\nafter", "[shell command execution disabled by policy]\nafter"),
    ("!`a` and !`b`", "[shell command execution disabled by policy] and [shell command execution disabled by policy]"),
    ("Not inline: x!`date`", "Not inline: x!`date`"),
    ("In code: `say !`hi``", "In code: `say !`hi``"),
    ("plain text", "plain text"),
])
def test_inline_shell_is_shown_as_claude_code_shows_it(body: str, shown: str) -> None:
    assert executables.without_shell(body) == shown
    assert (executables.first_shell(body) is None) is (body == shown)


def confine_run(tmp_path: Path, command: list[str]) -> subprocess.CompletedProcess[str]:
    inside = tmp_path / "session"
    inside.mkdir(exist_ok=True)
    return subprocess.run([sys.executable, "-I", "-S", str(wall.script()), "--write", str(inside), "--", *command],
                          capture_output=True, text=True, timeout=30, check=False, cwd=inside)


def test_a_confined_process_cannot_signal_or_trace_the_runner(tmp_path: Path) -> None:
    abi = confine.abi_version()
    if abi < 6:
        pytest.skip(f"Landlock ABI {abi}: signal scoping needs ABI 6 (Linux 6.12)")
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        done = confine_run(tmp_path, ["/bin/sh", "-c", f"kill -0 {sleeper.pid} && echo SIGNAL-OK; "
                                                       f"cat /proc/{os.getpid()}/environ >/dev/null && echo ENV-OK; "
                                                       f"ls /proc/{sleeper.pid}/root/ >/dev/null && echo ROOT-OK; "
                                                       "grep CapEff /proc/self/status"])
    finally:
        sleeper.kill()
        sleeper.wait()
    assert "SIGNAL-OK" not in done.stdout and "ENV-OK" not in done.stdout and "ROOT-OK" not in done.stdout, done
    assert "CapEff:\t0000000000000000" in done.stdout, done.stdout
    assert sleeper.returncode == -9  # ended by this test, not by the confined shell


def test_confinement_that_cannot_be_applied_starts_nothing(tmp_path: Path) -> None:
    if confine.abi_version() < 1:
        pytest.skip("no Landlock here: nothing to apply")
    # The session's folder is not there: the rule cannot be made, and the command must not start unconfined.
    done = subprocess.run([sys.executable, "-I", "-S", str(wall.script()), "--write", str(tmp_path / "absent"), "--",
                           "/bin/sh", "-c", "echo STARTED"], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 125 and "STARTED" not in done.stdout, done
    assert "the session was not started" in done.stderr


def test_required_confinement_refuses_a_machine_without_it(tmp_path: Path) -> None:
    # A python that cannot run the check stands for a kernel without Landlock: `required` is a usage error.
    missing = str(tmp_path / "no-python")
    with pytest.raises(wall.WallUnavailable, match="required"):
        wall.detect("required", python=missing)
    assert wall.detect("auto", python=missing).mode == "none"
    assert wall.detect("off").mode == "none"


def test_the_session_folder_never_takes_host_configuration(tmp_path: Path) -> None:
    """Behind the floor: even asked to, the workspace puts no case file in .claude/, .git/ or .mcp.json."""
    from runner.hosts import workspace

    root = hostile_library(tmp_path / "library", tmp_path / "marks", "http://127.0.0.1:9", tmp_path / "run")
    library, _ = load_library(root, Settings())
    files = workspace.LibraryFiles.of(library, 1_000_000)
    source = root / ".claude" / "skills" / "alpha" / ".claude" / "settings.json"
    (root / "data.txt").write_text("ordinary", encoding="utf-8")
    built = workspace.build(files, [], [(source, ".claude/settings.json"), (source, ".mcp.json"),
                                        (source, "x/.git/config"), (root / "data.txt", "data.txt")], tmp_path)
    try:
        project = built.project
        assert not (project / ".claude" / "settings.json").exists() and not (project / ".mcp.json").exists()
        assert not (project / "x").exists()
        assert (project / "data.txt").read_text(encoding="utf-8") == "ordinary"
        assert (project / ".claude" / "skills" / "alpha" / "SKILL.md").is_file()
        assert not (project / ".claude" / "settings.json").exists()
    finally:
        built.remove()
