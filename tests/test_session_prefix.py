"""One cacheable prefix across isolated Claude Code sessions (issue 15), with the real CLI against the fake API.

What the model receives before the case prompt (tools, system blocks, the first message's environment text,
listing and date) must be byte-identical across the sessions of a run, while every session keeps its own HOME,
config and project. Measured here on the requests the real CLI sent:
- auto-memory is off (its paragraph held the session's own memory path), so the system blocks never vary and a
  later session reads them from the cache a first one wrote, in any session-path mode;
- with a mount namespace (root) or a user namespace, each session's folder is bound at one fixed path, so the
  whole head is identical and every session has one prefix hash;
- without (the fallback, forced here with session_namespace = "off"), the head differs only in its working
  directory line, and each session has its own prefix hash; the mode is detected and recorded either way;
- a file one session writes in its HOME, config or project is absent from the next session, in every mode.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.core.observation import Observation, SessionSpec
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.claude_code import ClaudeCodeHost
from runner.hosts.prices import load as load_prices
from runner.hosts.sessionpath import CaseFolders, case_key, detect
from runner.hosts.workspace import LibraryFiles
from runner.testing.fake_anthropic import FakeAnthropic, blocks, dynamic, is_billing_block, skill, text, tool
from tests.conftest import EXAMPLE

KEY = "sk-test-prefix-marker-15"
SONNET = "claude-sonnet-4-6"
PROMPTS = ["Dependabot wants to bump pydantic from 2.5.3 to 2.8.2. Should I merge?",
           "Write the postmortem for last night's outage of the payments queue.",
           "Plan the migration of the orders table to the new schema."]
LEAK = "commit-message-of-the-repository-around-the-session-folders"
WRITING_TOOLS = ["Skill", "Read", "Write", "Glob", "Grep"]


def make_host(fake: FakeAnthropic, mode: str = "auto", tools: list[str] | None = None) -> ClaudeCodeHost:
    library, _ = load_library(EXAMPLE, Settings())
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    return ClaudeCodeHost(files, load_prices(Settings()), KEY, fake.url, None, tools or ["Skill", "Read", "Glob", "Grep"],
                          session_namespace=mode)


def run_sessions(host: ClaudeCodeHost, prompts: list[str], tools_turns: int = 4,
                 uids: list[str] | None = None) -> list[Observation]:
    """One session per prompt, one after another; `uids`: the case of each (default one case per session)."""
    async def main() -> list[Observation]:
        try:
            return [await host.run(SessionSpec(attempt_id=f"a{i}", uid=uids[i] if uids else f"u{i}", prompt=p,
                                               model=SONNET, max_turns=tools_turns, timeout_s=60,
                                               max_output_tokens=512))
                    for i, p in enumerate(prompts)]
        finally:
            await host.aclose()
    return asyncio.run(main())


def first_requests(fake: FakeAnthropic) -> list[dict[str, Any]]:
    return [r.body for r in fake.message_requests if r.turn == 0]


def head(body: dict[str, Any], prompt: str) -> dict[str, Any]:
    """Everything the request holds before the case prompt, the billing block left out."""
    first = body["messages"][0]["content"]
    at = next(i for i, block in enumerate(first) if block.get("text") == prompt)
    return {"tools": body["tools"], "system": [b for b in body["system"] if not is_billing_block(b)],
            "messages": [{k: v for k, v in block.items() if k != "cache_control"} for block in first[:at]]}


def system_tokens(body: dict[str, Any]) -> int:
    """What the fake counts for the system up to its last breakpoint (the cross-session part)."""
    return len(json.dumps([]) + json.dumps(body["system"])) // 4


def test_the_system_prefix_is_one_and_later_sessions_read_it_in_every_mode() -> None:
    for mode in ("auto", "off"):
        with FakeAnthropic() as fake:
            fake.default(skill("dependency-upgrade-reviewer"), text("Done."))
            observations = run_sessions(make_host(fake, mode), PROMPTS)
            bodies = first_requests(fake)
        assert all(o.ok for o in observations), [o.error_message for o in observations]
        heads = [head(body, prompt) for body, prompt in zip(bodies, PROMPTS)]
        assert heads[0]["system"] == heads[1]["system"] == heads[2]["system"], mode
        assert heads[0]["tools"] == heads[1]["tools"] == heads[2]["tools"]
        assert not any("memory" in block["text"] and "skill-evals-" in block["text"] for block in heads[0]["system"])
        # Sessions 2 and 3 read (at least) the system prefix session 1 wrote.
        for later in observations[1:]:
            assert later.usage.cache_read_input_tokens >= 2 * system_tokens(bodies[0]) - 20, mode


def test_with_a_namespace_every_session_sends_one_head_and_has_one_prefix_hash() -> None:
    with FakeAnthropic() as fake:
        fake.default(skill("dependency-upgrade-reviewer"), text("Done."))
        host = make_host(fake)
        if host.session_path.mode == "per-session-path":
            pytest.skip(f"this machine gives no namespace: {host.session_path.detail}")
        observations = run_sessions(host, PROMPTS)
        bodies = first_requests(fake)
    heads = [head(body, prompt) for body, prompt in zip(bodies, PROMPTS)]
    assert heads[0] == heads[1] == heads[2]
    assert f"Primary working directory: {host.session_path.path}/home/project" in heads[0]["messages"][0]["text"]
    hashes = {o.prefix_hash for o in observations}
    assert len(hashes) == 1 and None not in hashes
    assert {o.session_path for o in observations} == {host.session_path.mode}


def test_the_fallback_is_detected_and_recorded_and_only_the_working_directory_differs() -> None:
    with FakeAnthropic() as fake:
        fake.default(text("Done."))
        host = make_host(fake, "off")
        observations = run_sessions(host, PROMPTS[:2])
        bodies = first_requests(fake)
    assert host.session_path.mode == "per-session-path" and host.session_path.path is None
    assert "off" in host.session_path.detail
    assert [o.session_path for o in observations] == ["per-session-path"] * 2
    one, two = (head(body, prompt) for body, prompt in zip(bodies, PROMPTS))
    assert one["system"] == two["system"] and one["messages"][1:] == two["messages"][1:]
    cwd = [re.search(r"Primary working directory: (\S+)", h["messages"][0]["text"]).group(1) for h in (one, two)]
    assert cwd[0] != cwd[1]
    assert one["messages"][0]["text"].replace(cwd[0], "X") == two["messages"][0]["text"].replace(cwd[1], "X")
    assert observations[0].prefix_hash != observations[1].prefix_hash


def test_per_case_path_gives_a_cases_sessions_one_head_and_another_case_its_own_path(tmp_path: Path) -> None:
    """Without a namespace (forced: session_namespace = "case"), a case's sessions one after another send the very
    same head, working directory included, so they share one prefix hash; another case differs only in its working
    directory. Each session's folder is made afresh and is gone when it ends."""
    # The folders' parent is inside a git repository (a TMPDIR there) and no Landlock wall keeps git out of it (a
    # kernel without Landlock): nothing of that repository may reach the model.
    for args in (["init", "-q", "-b", "leaky-branch"], ["-c", "user.name=x", "-c", "user.email=x@example.com",
                                                         "commit", "-q", "--allow-empty", "-m", LEAK]):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)
    with FakeAnthropic() as fake:
        fake.default(text("Done."))
        library, _ = load_library(EXAMPLE, Settings())
        host = ClaudeCodeHost(LibraryFiles.of(library, Settings().limits.max_file_bytes), load_prices(Settings()),
                              KEY, fake.url, None, ["Skill", "Read", "Glob", "Grep"], work_parent=tmp_path,
                              session_namespace="case", session_confinement="off")
        prompts = [PROMPTS[0], PROMPTS[0], PROMPTS[0]]
        observations = run_sessions(host, prompts, uids=["case-a", "case-a", "case-b"])
        bodies = first_requests(fake)
    assert host.session_path.mode == "per-case-path" and host.session_path.path is None
    assert all(o.ok for o in observations) and {o.session_path for o in observations} == {"per-case-path"}
    heads = [head(body, prompt) for body, prompt in zip(bodies, prompts)]
    cwd = [re.search(r"Primary working directory: (\S+)", h["messages"][0]["text"]).group(1) for h in heads]
    assert heads[0] == heads[1] and cwd[0] == cwd[1] and cwd[2] != cwd[0]
    assert cwd[0].startswith(f"{tmp_path}/skill-evals-case-") and cwd[0].endswith("-0/home/project")
    assert heads[2]["messages"][0]["text"].replace(cwd[2], "X") == heads[0]["messages"][0]["text"].replace(cwd[0], "X")
    assert observations[0].prefix_hash == observations[1].prefix_hash != observations[2].prefix_hash
    assert not list(tmp_path.glob("skill-evals-case-*"))  # every session's folder (and its mark) removed
    sent = json.dumps(bodies)
    assert LEAK not in sent and "leaky-branch" not in sent
    assert "Is a git repository: true" in sent and "Recent commits:\\n\\n\\n" in sent  # the same empty status everywhere


def test_case_folders_are_made_afresh_and_one_live_session_holds_each(tmp_path: Path) -> None:
    folders = CaseFolders(tmp_path)
    key = case_key("skill/evals/case", [])
    first = folders.claim(key)
    assert first == tmp_path / f"skill-evals-case-{key}-0" and first.is_dir() and not any(first.iterdir())
    assert oct(first.stat().st_mode & 0o777) == "0o700"
    second = folders.claim(key)  # two at once: two paths
    assert second.name.endswith("-1")
    first.rmdir()
    folders.release(first)
    assert folders.claim(key) == first  # the next session of the case: the first path again
    # A folder or a link already there (another process's, a killed run's, a planted link) is never used.
    other = case_key("skill/evals/other", [])
    (tmp_path / f"skill-evals-case-{other}-0").symlink_to(tmp_path / "elsewhere")
    assert folders.claim(other).name.endswith("-1") and not (tmp_path / "elsewhere").exists()
    # A probe's arms leave different skills out: different folders.
    assert case_key("skill/evals/case", ["skill"]) != key


def test_per_case_path_is_never_offered_when_a_leftover_process_could_reach_the_next_session(tmp_path: Path) -> None:
    chosen = detect("case", tmp_path / "fixed", reuse_safe=False)
    assert chosen.mode == "per-session-path" and "per-case-path" in chosen.detail
    assert detect("case", tmp_path / "fixed").mode == "per-case-path"
    assert "take turns" in detect("case", tmp_path / "fixed").describe()


def test_one_per_arm_starts_the_same_sessions_one_at_a_time_per_arm() -> None:
    """per-case-path (Executor.one_per_arm): an arm never has two sessions in flight; the other arm runs beside it,
    and in the end the same starts were made."""
    from runner.execute.executor import CaseStarts
    from runner.plan.plan import PlannedCase

    planned = PlannedCase(uid="x/evals/probe", skill="x", kind="probe", target="x", repeats=3, quorum=2, why="t",
                          unrun_reason=None, arms=["control", "treatment"])

    def drain(starts: CaseStarts) -> list[list[tuple[str, int]]]:
        rounds = []
        while taken := starts.take():
            rounds.append(taken)
            for start in taken:
                starts.finished(start, None)
        return rounds

    together = drain(CaseStarts(planned, [], rule=None, first_alone=True))
    assert together == [[("control", 1), ("treatment", 1)],
                        [("control", 2), ("treatment", 2), ("control", 3), ("treatment", 3)]]
    apart = CaseStarts(planned, [], rule=None, first_alone=True, one_per_arm=True)
    assert apart.take() == [("control", 1), ("treatment", 1)]
    apart.finished(("control", 1), None)
    assert apart.take() == []  # the leaders: nothing else until both ended
    apart.finished(("treatment", 1), None)
    assert apart.take() == [("control", 2), ("treatment", 2)]
    apart.finished(("treatment", 2), None)
    assert apart.take() == [("treatment", 3)]  # control 2 is still in flight
    apart.finished(("control", 2), None)
    assert apart.take() == [("control", 3)]
    apart.finished(("control", 3), None)
    apart.finished(("treatment", 3), None)
    assert apart.take() == []


def _places(body: dict[str, Any]) -> list[str]:
    """The session's project, HOME and config folders, from the working directory it was told."""
    cwd = Path(re.search(r"Primary working directory: (\S+)", json.dumps(body["messages"][0]))
               .group(1).replace("\\n", ""))
    return [str(cwd), str(cwd.parent), str(cwd.parent.parent / "config")]


def _writes(body: dict[str, Any]) -> Any:
    return blocks(*[tool("Write", {"file_path": f"{place}/left-behind.txt", "content": "from session one"})
                    for place in _places(body)])


def _reads(body: dict[str, Any]) -> Any:
    return blocks(*[tool("Read", {"file_path": f"{place}/left-behind.txt"}) for place in _places(body)])


@pytest.mark.parametrize("mode", ["auto", "user", "case", "off"])
def test_a_file_a_session_writes_in_home_config_or_project_is_absent_from_the_next_session(mode: str) -> None:
    """In per-case-path the two sessions are one case's: the second gets the very path the first had."""
    with FakeAnthropic() as fake:
        fake.script("write them", dynamic(_writes), dynamic(_reads), text("written"))
        fake.script("look for them", dynamic(_reads), text("looked"))
        host = make_host(fake, mode, WRITING_TOOLS)
        first, second = run_sessions(host, ["write them", "look for them"], tools_turns=5,
                                     uids=["one-case"] * 2 if mode == "case" else None)
        requests = fake.message_requests
    if mode == "case":
        assert host.session_path.mode == "per-case-path", host.session_path
    assert first.ok and second.ok, (first.error_message, second.error_message)
    results = {r.script: [b for m in r.body["messages"][1:] if m["role"] == "user" and isinstance(m["content"], list)
                          for b in m["content"] if b.get("type") == "tool_result"] for r in requests}
    written = [json.dumps(b["content"]) for b in results["write them"]]
    # Session one really wrote the three files and read them back...
    assert [c.name for c in first.tool_calls] == ["Write"] * 3 + ["Read"] * 3
    assert not any(c.is_error for c in first.tool_calls)
    assert sum("from session one" in r for r in written) == 3
    # ...and session two, at the same places as it sees them, finds none of them.
    assert [(c.name, c.is_error) for c in second.tool_calls] == [("Read", True)] * 3
    assert all("does not exist" in json.dumps(b["content"]) for b in results["look for them"])
    if host.session_path.mode != "per-session-path":
        assert _places(requests[0].body) == _places(requests[-1].body)  # the very same paths, other folders


# A machine that gives no namespace, made here: a user namespace (this test's only use of one) in which no
# further user namespace may be created (max_user_namespaces 0) and every capability is dropped, so neither
# `unshare --mount` (EPERM) nor `unshare --user` (ENOSPC) works — as in a container without CAP_SYS_ADMIN or on a
# runner whose AppArmor restricts unprivileged user namespaces.
RESTRICTED = ("echo 0 > /proc/sys/user/max_user_namespaces && "
              "exec setpriv --inh-caps=-all --bounding-set=-all \"$@\"")
SESSION_IN_RESTRICTED = '''
import asyncio, json, sys
from runner.corpus.loader import load_library
from runner.core.observation import SessionSpec
from runner.hosts.claude_code import ClaudeCodeHost
from runner.hosts.workspace import LibraryFiles
from runner.hosts.prices import load as load_prices
from runner.hosts.sessionpath import CaseFolders, case_key, detect
from runner.corpus.settings import Settings
library, _ = load_library(sys.argv[1], Settings())
host = ClaudeCodeHost(LibraryFiles.of(library, Settings().limits.max_file_bytes), load_prices(Settings()), "sk-x",
                      sys.argv[2], None, ["Skill", "Read", "Glob", "Grep"])
obs = asyncio.run(host.run(SessionSpec(attempt_id="a", uid="u", prompt="restricted machine", model="claude-sonnet-4-6",
                                       max_turns=3, timeout_s=60, max_output_tokens=256)))
print(json.dumps({"detected": host.session_path.model_dump(), "ok": obs.ok, "error": obs.error_message,
                  "session_path": obs.session_path, "fired": obs.fired()}))
'''


def test_a_machine_without_namespaces_falls_back_says_why_and_still_runs_sessions() -> None:
    import os
    import shutil
    import subprocess
    import sys

    if os.geteuid() != 0 or shutil.which("unshare") is None or shutil.which("setpriv") is None:
        pytest.skip("making a restricted machine needs root, unshare and setpriv (CI runs as root)")
    with FakeAnthropic() as fake:
        fake.default(skill("migration-planner"), text("Done."))
        done = subprocess.run(["unshare", "--user", "--map-root-user", "sh", "-c", RESTRICTED, "restricted",
                               sys.executable, "-c", SESSION_IN_RESTRICTED, str(EXAMPLE), fake.url],
                              cwd=Path(__file__).parent.parent, capture_output=True, text=True, timeout=300, check=False)
        served = len(fake.message_requests)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    detected = found["detected"]
    # No namespace: each case's sessions take turns at one path of the case's own (the action's container too).
    assert detected["mode"] == "per-case-path" and detected["path"] is None
    assert "mount-namespace: exit 1" in detected["detail"] and "Operation not permitted" in detected["detail"]
    assert "user-namespace: exit 1" in detected["detail"]
    assert found["ok"] and found["session_path"] == "per-case-path" and found["fired"] == ["migration-planner"]
    assert served == 2


@pytest.mark.parametrize(("early_stop", "namespace"), [(True, "auto"), (False, "auto"), (False, "case")],
                         ids=["early-stop", "fixed-n", "per-case-path"])
def test_a_cases_later_sessions_start_after_its_first_and_read_its_first_turn(early_stop: bool, namespace: str,
                                                                            tmp_path: Path) -> None:
    """With one session path every session of a case sends the same first turn (head and prompt); the cache
    serves it only to a request that arrives after the response that wrote it began. So the first session of a
    case runs alone, and its other sessions, started after it, read its whole first turn. Without a namespace
    (per-case-path) they take turns at the case's path: no two of them are ever in flight at once."""
    import os
    import subprocess
    import sys

    uid = "dependency-upgrade-reviewer/evals/positive-review-minor-bump"
    with FakeAnthropic() as fake:
        fake.default(skill("dependency-upgrade-reviewer"), text("Done."))
        env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
        env.update({"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": KEY, "CI": "true"})
        out = tmp_path / "run"
        args = [sys.executable, "-m", "runner", "run", "--library", str(EXAMPLE), "--out", str(out), "--no-judge",
                "--repeats", "3", "--quorum", "2", "--concurrency", "3", "--timeout", "60",
                "--case", uid, "--no-library-validator"] + ([] if early_stop else ["--no-early-stop"])
        if namespace != "auto":
            (tmp_path / "settings.toml").write_text(f'[run]\nsession_namespace = "{namespace}"\n', encoding="utf-8")
            args += ["--config", str(tmp_path / "settings.toml")]
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        requests = fake.message_requests
    plan = json.loads((out / "plan.json").read_text())
    if plan["session_path"]["mode"] == "per-session-path":
        pytest.skip(f"this machine gives no namespace: {plan['session_path']['detail']}")
    assert plan["estimate"]["repeats_read_first_turn"] is True
    attempts = sorted((json.loads(line) for line in (out / "attempts.jsonl").read_text().splitlines()),
                      key=lambda a: a["repeat"])
    # Early stop starts k = 2 at first (a third only if they disagree); fixed N starts all 3.
    assert len(attempts) == (3 if not early_stop else len(attempts)) >= 2
    assert all(a["turns"] and not a["error_kind"] for a in attempts)
    firsts = [r for r in requests if r.turn == 0]
    last_of_first = max(r.time for r in requests if r.body["metadata"] == firsts[0].body["metadata"])
    assert all(r.time > last_of_first for r in firsts[1:])  # started after the first session ended
    assert {a["session_path"] for a in attempts} == {plan["session_path"]["mode"]}
    if namespace == "case":
        assert plan["session_path"]["mode"] == "per-case-path"
        spans = sorted((min(r.time for r in requests if r.body["metadata"] == f.body["metadata"]),
                        max(r.time for r in requests if r.body["metadata"] == f.body["metadata"])) for f in firsts)
        assert all(later[0] > earlier[1] for earlier, later in zip(spans, spans[1:]))  # one at a time
    first_turn = attempts[0]["first_turn_input_tokens"]
    for later in attempts[1:]:
        # Turn 0 reads the whole first turn, turn 1 reads turn 0: nothing of the first turn is written again.
        # (Turn 1 counts the same blocks without turn 0's breakpoint marker: ~10 tokens fewer.)
        assert later["usage"]["cache_read_input_tokens"] >= 2 * first_turn - 20
        assert later["usage"]["cache_creation_input_tokens"] < attempts[0]["usage"]["cache_creation_input_tokens"] / 2
