"""One activation recogniser (issue 17): what counts as a skill or subagent activation, and when the host's
answer rejects it, decided in one place (runner.hosts.activation) for the claude-code, api and replay hosts.

- A table of tool calls, each with and without an error result, through the recogniser.
- One conversation seen by the claude-code host's recorder (the SDK's messages, as the CLI streams them) and by
  the replay host (the same conversation as the claude-code host records it, and as a Messages API transcript):
  the activations must be the same, rejected flags included.
- The real CLI against the fake API: a Task/Agent call the CLI refuses (the default allowlist offers no such
  tool) is a rejected activation in the claude-code host, in the replay of its transcript, and in the verdict of
  `skill-evals run` (the subagent-target case is UNRUN where no subagent can start, and PASSes where one can). The api host and its replay agree too.

Run against the code before issue 17, the agreement tests failed: the claude-code recorder kept the refused
Task/Agent call (and a failed Read of a SKILL.md) as an activation where the replay host rejected (or dropped) it,
the replay host read nothing of a claude-code transcript, and it kept `plugin:name` as the name.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from claude_agent_sdk import AssistantMessage, ResultMessage, TextBlock, ToolResultBlock, ToolUseBlock, UserMessage

from runner.core.observation import Activation, Observation, SessionSpec
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.activation import Turns, apply_result, recognise, skill_md_name, skill_name
from runner.hosts.api import ApiHost
from runner.hosts.claude_code import ClaudeCodeHost, _Recorder
from runner.hosts.prices import load as load_prices
from runner.hosts.replay import ReplayHost, _from_transcript
from runner.hosts.workspace import LibraryFiles
from runner.testing.fake_anthropic import FakeAnthropic, blocks, text, tool
from tests.conftest import EXAMPLE
from tests.helpers import attempts, case, results_of, skill_evals_run

MODEL = "claude-sonnet-4-6"
KEY = "sk-test-activation-17"
AGENT_DENIED = ("<tool_use_error>Error: No such tool available: Agent. Agent is disabled for this session, in "
                "subagents as well as here.</tool_use_error>")  # what CLI 2.1.332 answered (measured)


def acts(activations: list[Activation]) -> list[tuple[str, str, int, bool]]:
    return [(a.name, a.mechanism, a.turn, a.rejected) for a in activations]


def spec(attempt_id: str = "a#main#1", prompt: str = "review the auth code") -> SessionSpec:
    return SessionSpec(attempt_id=attempt_id, uid="u/evals/1", prompt=prompt, model=MODEL, max_turns=12,
                       timeout_s=60, max_output_tokens=512)


# ---- the recogniser, call by call -----------------------------------------------------------------------

SR = "security-reviewer (subagent)"
TASK = {"subagent_type": "security-reviewer", "description": "review", "prompt": "review the auth code"}
# (tool, input, aliases) -> (name, mechanism) or None, for a call the host answered; the same call answered with
# an error is the same activation, rejected (every mechanism alike: runner.hosts.activation).
TABLE: list[tuple[str, Any, dict[str, str], tuple[str, str] | None]] = [
    ("Skill", {"skill": "pdf"}, {}, ("pdf", "skill-tool")),
    ("Skill", {"skill": "no-such-skill"}, {}, ("no-such-skill", "skill-tool")),  # the host's answer decides
    ("Skill", {"skill": "plugin:pdf"}, {}, ("pdf", "skill-tool")),  # semantics §5: also plugin:name
    ("Skill", {"skill": "/pdf"}, {}, ("pdf", "skill-tool")),
    ("Skill", {"skill": " pdf "}, {}, ("pdf", "skill-tool")),  # CLI 2.1.332 launches " pdf " as pdf
    ("Skill", {"skill": "pdf", "args": "x"}, {"pdf": "pdf-tools"}, ("pdf-tools", "skill-tool")),  # frontmatter name
    ("Skill", {"skill": ""}, {}, None),
    ("Skill", {"skill": 5}, {}, None),
    ("Skill", {}, {}, None),
    ("Skill", "pdf", {}, None),  # not an object
    ("Read", {"file_path": ".claude/skills/pdf/SKILL.md"}, {}, ("pdf", "skill-md-read")),
    ("Read", {"file_path": "/tmp/s/home/project/.claude/skills/pdf/SKILL.md"}, {}, ("pdf", "skill-md-read")),
    ("Read", {"file_path": ".claude/skills/./pdf/SKILL.md"}, {}, ("pdf", "skill-md-read")),  # the CLI reads it
    ("Read", {"file_path": ".claude/skills/pdf/SKILL.md"}, {"pdf": "pdf-tools"}, ("pdf", "skill-md-read")),  # a folder
    ("Read", {"file_path": ".claude/skills/gone/SKILL.md"}, {}, ("gone", "skill-md-read")),
    ("Read", {"file_path": "README.md"}, {}, None),
    ("Read", {"file_path": ".claude/skills/pdf/references/forms.md"}, {}, None),
    ("Read", {"file_path": ".claude/skills/pdf/skill.md"}, {}, None),
    ("Read", {"file_path": "x.claude/skills/pdf/SKILL.md"}, {}, None),
    ("Read", {"file_path": ".claude/skills/SKILL.md"}, {}, None),
    ("Read", {"file_path": ""}, {}, None),
    ("Glob", {"pattern": ".claude/skills/*/SKILL.md"}, {}, None),
    ("Grep", {"pattern": "name:", "path": ".claude/skills/pdf/SKILL.md"}, {}, None),
    ("Task", TASK, {}, (SR, "subagent")),
    ("Agent", TASK, {}, (SR, "subagent")),
    ("Agent", {"subagent_type": "no-such-agent"}, {}, ("no-such-agent (subagent)", "subagent")),
    ("Agent", {"description": "review", "prompt": "x"}, {}, None),
    ("Task", {"subagent_type": ""}, {}, None),
    ("Bash", {"command": "cat .claude/skills/pdf/SKILL.md"}, {}, None),
]


@pytest.mark.parametrize("tool_name,tool_input,aliases,expected", TABLE)
@pytest.mark.parametrize("is_error", [None, False, True])
def test_the_recogniser_table(tool_name: str, tool_input: Any, aliases: dict[str, str],
                              expected: tuple[str, str] | None, is_error: bool | None) -> None:
    activation = recognise(tool_name, tool_input, "toolu_1", 3, is_error=is_error, aliases=aliases)
    if expected is None:
        assert activation is None
        return
    assert activation is not None
    assert (activation.name, activation.mechanism, activation.turn, activation.tool_use_id) == (*expected, 3, "toolu_1")
    # A call the host answered with an error is rejected, whatever the mechanism (a refused Task/Agent call
    # started no subagent); no result (None) or a good one leaves it an activation.
    assert activation.rejected is (is_error is True)


def test_a_result_that_arrives_later_marks_the_activation() -> None:
    """The claude-code host sees a tool_use before its tool_result: `apply_result` decides as `recognise` would."""
    for tool_name, tool_input, aliases, expected in TABLE:
        if expected is None:
            continue
        for is_error in (None, False, True):
            later = recognise(tool_name, tool_input, "t", 0, aliases=aliases)
            assert later is not None and later.rejected is False
            apply_result(later, is_error)
            assert later == recognise(tool_name, tool_input, "t", 0, is_error=is_error, aliases=aliases)


def test_names_and_turns() -> None:
    assert skill_name("plugin:pdf") == skill_name("/pdf") == skill_name(" pdf\n") == "pdf"
    assert skill_name("pdf", {"pdf": "pdf-tools"}) == "pdf-tools" and skill_name("") == ""
    assert skill_md_name(".claude/skills/pdf/../docx/SKILL.md") == "docx"
    assert skill_md_name("/p/.claude/skills/pdf/SKILL.md/") == "pdf" and skill_md_name("SKILL.md") is None
    turns = Turns()
    # One reply streamed as several messages with one id is one turn; a message without an id is a turn of its own.
    assert [turns.of(i) for i in ("m1", "m1", "m2", None, "m2", None, "m3")] == [0, 0, 1, 2, 1, 3, 4]
    assert turns.count == 5


# ---- one conversation, as each host sees it -------------------------------------------------------------

# (reply blocks, tool results by tool_use id: (content, is_error)). One entry per model reply (= one turn).
Reply = tuple[list[dict[str, Any]], dict[str, tuple[str, bool]]]


def use(use_id: str, name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "id": use_id, "name": name, "input": tool_input}


CONVERSATION: list[Reply] = [
    ([{"type": "text", "text": "Let me look."}, use("t0", "Skill", {"skill": "test-report-triage"})],
     {"t0": ("Launching skill: test-report-triage", False)}),
    ([use("t1", "Skill", {"skill": "no-such-skill"})], {"t1": ("Unknown skill: no-such-skill", True)}),
    ([use("t2", "Skill", {"skill": "plugin:migration-planner"})], {"t2": ("Launching skill: migration-planner", False)}),
    ([use("t3", "Read", {"file_path": ".claude/skills/dependency-upgrade-reviewer/SKILL.md"})],
     {"t3": ("---\nname: dependency-upgrade-reviewer\n---\n...", False)}),
    ([use("t4", "Read", {"file_path": ".claude/skills/gone/SKILL.md"})], {"t4": ("File does not exist.", True)}),
    ([use("t5", "Read", {"file_path": "README.md"})], {"t5": ("# readme", False)}),
    ([use("t6", "Agent", {"subagent_type": "security-reviewer", "description": "review", "prompt": "review"})],
     {"t6": (AGENT_DENIED, True)}),
    ([use("t7", "Task", {"subagent_type": "security-reviewer", "description": "review", "prompt": "review"})],
     {"t7": ("The review found nothing.", False)}),
    ([{"type": "text", "text": "Done."}], {}),
]

# Decided (runner.hosts.activation): a call the host answered with an error is a rejected activation, whatever
# the mechanism; `plugin:name` names the skill `name` (semantics §5).
EXPECTED = [
    ("test-report-triage", "skill-tool", 0, False),
    ("no-such-skill", "skill-tool", 1, True),
    ("migration-planner", "skill-tool", 2, False),
    ("dependency-upgrade-reviewer", "skill-md-read", 3, False),
    ("gone", "skill-md-read", 4, True),
    ("security-reviewer (subagent)", "subagent", 6, True),
    ("security-reviewer (subagent)", "subagent", 7, False),
]


def sdk_messages(conversation: list[Reply]) -> list[Any]:
    """The conversation as claude-agent-sdk yields it: one AssistantMessage per content block of a reply (all
    with the reply's message id), the tool results as a UserMessage, a ResultMessage at the end."""
    out: list[Any] = []
    for index, (reply, results) in enumerate(conversation):
        for block in reply:
            content = (ToolUseBlock(id=block["id"], name=block["name"], input=block["input"])
                       if block["type"] == "tool_use" else TextBlock(text=block["text"]))
            out.append(AssistantMessage(content=[content], model=MODEL, message_id=f"msg_{index}"))
        if results:
            out.append(UserMessage(content=[ToolResultBlock(tool_use_id=use_id, content=content, is_error=error)
                                            for use_id, (content, error) in results.items()]))
    out.append(ResultMessage(subtype="success", duration_ms=1, duration_api_ms=1, is_error=False,
                             num_turns=len(conversation), session_id="s", result="Done."))
    return out


def api_transcript(conversation: list[Reply]) -> list[dict[str, Any]]:
    """The same conversation as a Messages API transcript (what the api host records)."""
    out: list[dict[str, Any]] = [{"role": "user", "content": "review the auth code"}]
    for index, (reply, results) in enumerate(conversation):
        out.append({"id": f"msg_{index}", "type": "message", "role": "assistant", "content": reply})
        if results:
            out.append({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": use_id, "content": content, **({"is_error": True} if error else {})}
                for use_id, (content, error) in results.items()]})
    return out


def replayed(tmp_path: Path, transcript: list[Any], name: str = "run", fired: list[str] | None = None) -> Observation:
    """The replay host's observation of a run folder holding one finished attempt with this transcript."""
    run_dir = tmp_path / name
    (run_dir / "transcripts").mkdir(parents=True)
    (run_dir / "transcripts" / "a.json").write_text(json.dumps(transcript, default=str), encoding="utf-8")
    record = dict(attempt_id="a#main#1", uid="u/evals/1", arm="main", repeat=1, plan_hash="h", status="finished",
                  error_kind=None, error_message=None, turns=len(CONVERSATION), transcript="transcripts/a.json",
                  final_answer="Done.", outcome={"state": "PASS", "fired": fired or []})
    (run_dir / "attempts.jsonl").write_text(json.dumps(record) + "\n", encoding="utf-8")
    return asyncio.run(ReplayHost(run_dir).run(spec()))


def recorded(messages: list[Any]) -> _Recorder:
    recorder = _Recorder(spec())
    for message in messages:
        recorder.on_message(message)
    return recorder


def test_claude_code_and_replay_agree_on_one_conversation(tmp_path: Path) -> None:
    recorder = recorded(sdk_messages(CONVERSATION))
    # The replay of the transcript the claude-code host records (runner.hosts.claude_code._as_dict) ...
    of_claude_code = replayed(tmp_path, recorder.transcript, "claude-code-run")
    # ... and of the same conversation recorded as Messages API messages (the api host's transcript).
    of_api = replayed(tmp_path, api_transcript(CONVERSATION), "api-run")
    assert acts(recorder.activations) == acts(of_claude_code.activations) == acts(of_api.activations) == EXPECTED
    assert [a.tool_use_id for a in recorder.activations] == [a.tool_use_id for a in of_api.activations]
    fired = ["test-report-triage", "migration-planner", "dependency-upgrade-reviewer", "security-reviewer (subagent)"]
    assert of_claude_code.fired() == of_api.fired() == fired


def test_a_denied_subagent_call_is_rejected_by_both_hosts(tmp_path: Path) -> None:
    """The disagreement of issue 17 on its own: the replay host marked it rejected, the claude-code host did not."""
    denied = [CONVERSATION[6], ([{"type": "text", "text": "Delegated."}], {})]
    recorder = recorded(sdk_messages(denied))
    assert acts(recorder.activations) == [("security-reviewer (subagent)", "subagent", 0, True)]
    assert acts(replayed(tmp_path, api_transcript(denied)).activations) == acts(recorder.activations)


def replay_acts(transcript: list[Any]) -> list[tuple[str, str, int, bool]]:
    """The replay host's activations of a transcript, after a trip through JSON (as a run folder keeps it)."""
    return acts(_from_transcript(json.loads(json.dumps(transcript, default=str)))[0])


def test_a_slash_command_is_recognised_alike() -> None:
    command = ("<command-message>migration-planner</command-message>\n<command-name>/migration-planner</command-name>\n"
               "<command-args>orders</command-args>")
    recorder = recorded([UserMessage(content=command), *sdk_messages([([{"type": "text", "text": "Planned."}], {})])])
    expected = [("migration-planner", "slash-command", 0, False)]
    assert acts(recorder.activations) == expected
    with_blocks = [{"role": "user", "content": [{"type": "text", "text": command}, {"type": "text", "text": "body"}]},
                   {"role": "assistant", "content": [{"type": "text", "text": "Planned."}]}]
    assert replay_acts(recorder.transcript) == replay_acts(with_blocks) == expected


# ---- the real CLI, and the api host ------------------------------------------------------------------------

def test_the_real_cli_refuses_a_subagent_call_and_every_host_says_so(tmp_path: Path) -> None:
    """Claude Code (default allowlist: Skill, Read, Glob, Grep) answers a scripted Agent call with an error; the
    claude-code host records a rejected activation, and the replay of the same transcript agrees call by call."""
    library, _ = load_library(EXAMPLE, Settings())
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    prompt = "Find where secrets leaked from CI (activation test 17)."
    with FakeAnthropic() as fake:
        fake.script(prompt[:40],
                    blocks("Checking.", tool("Skill", {"skill": "test-report-triage"})),
                    tool("Skill", {"skill": "no-such-skill"}),
                    tool("Read", {"file_path": ".claude/skills/migration-planner/SKILL.md"}),
                    tool("Read", {"file_path": ".claude/skills/gone/SKILL.md"}),
                    tool("Agent", {"subagent_type": "security-reviewer", "description": "review", "prompt": "r"}),
                    text("Delegated."))
        host = ClaudeCodeHost(files, load_prices(Settings()), KEY, fake.url, None, ["Skill", "Read", "Glob", "Grep"],
                              work_parent=tmp_path)

        async def main() -> Observation:
            try:
                return await host.run(spec(prompt=prompt))
            finally:
                await host.aclose()
        obs = asyncio.run(main())
    assert obs.ok, obs.error_message
    agent = next(call for call in obs.tool_calls if call.name == "Agent")
    assert agent.is_error is True  # the CLI refused it: no subagent ran
    assert acts(obs.activations) == [
        ("test-report-triage", "skill-tool", 0, False),
        ("no-such-skill", "skill-tool", 1, True),
        ("migration-planner", "skill-md-read", 2, False),
        ("gone", "skill-md-read", 3, True),
        ("security-reviewer (subagent)", "subagent", 4, True),
    ]
    assert obs.fired() == ["test-report-triage", "migration-planner"]
    replay = replayed(tmp_path, json.loads(json.dumps(obs.transcript, default=str)), fired=obs.fired())
    assert acts(replay.activations) == acts(obs.activations)
    assert [a.tool_use_id for a in replay.activations] == [a.tool_use_id for a in obs.activations]
    assert replay.fired() == obs.fired()


def test_an_allowed_subagent_call_is_an_activation(tmp_path: Path) -> None:
    """With `Agent` in the allowlist the CLI starts the subagent: the same call is an activation that fired."""
    library, _ = load_library(EXAMPLE, Settings())
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    prompt = "Review the auth code for leaked secrets (activation test 17)."
    with FakeAnthropic() as fake:
        fake.script(prompt[:40], tool("Agent", {"subagent_type": "security-reviewer", "description": "review",
                                                "prompt": "SUBAGENT TASK 17"}), text("Delegated."))
        fake.script("SUBAGENT TASK 17", text("Subagent report: nothing found."))
        host = ClaudeCodeHost(files, load_prices(Settings()), KEY, fake.url, None,
                              ["Skill", "Read", "Glob", "Grep", "Agent"], work_parent=tmp_path)

        async def main() -> Observation:
            try:
                return await host.run(spec(prompt=prompt))
            finally:
                await host.aclose()
        obs = asyncio.run(main())
    assert obs.ok, obs.error_message
    assert [call.is_error for call in obs.tool_calls if call.name == "Agent"] == [False]
    assert acts(obs.activations) == [("security-reviewer (subagent)", "subagent", 0, False)]
    assert obs.fired() == ["security-reviewer (subagent)"]
    replay = replayed(tmp_path, json.loads(json.dumps(obs.transcript, default=str)), fired=obs.fired())
    assert acts(replay.activations) == acts(obs.activations)


def test_a_subagent_case_runs_only_where_a_subagent_can_start(fake: FakeAnthropic, tmp_path: Path) -> None:
    """The example library's subagent-target case. With the default allowlist (no Agent tool) a subagent cannot
    start, so the case is UNRUN (subagent-not-callable): it never runs, and never FAILs for the harness's
    configuration. With Agent allowed, the model's call starts the subagent and the case's activation PASSes;
    replay of the recorded transcript agrees."""
    uid = "incident-postmortem-writer/trigger/breach-forensics-goes-to-security-reviewer"
    library, _ = load_library(EXAMPLE, Settings())
    prompt = next(c.prompt for c in library.cases if c.uid == uid)
    fake.script(prompt[:60], tool("Agent", {"subagent_type": "security-reviewer", "description": "forensics",
                                            "prompt": "Find the exposed secrets and the attack path."}),
                text("Delegated to the security reviewer."))
    fake.default(text("Reviewed."))  # the subagent's own session
    held = tmp_path / "default"
    done = skill_evals_run(fake, held, "--case", uid, "--repeats", "1", "--quorum", "1")
    assert done.returncode == 0, done.stdout + done.stderr
    result = case(results_of(held), uid)
    assert (result["state"], result["reason"]) == ("UNRUN", "subagent-not-callable"), result
    assert not (held / "attempts.jsonl").exists() or attempts(held, uid) == []
    assert not [r for r in fake.message_requests if prompt[:60] in json.dumps(r.body)]
    config = tmp_path / "agent.toml"
    config.write_text('[run]\nallowed_tools = ["Skill", "Read", "Glob", "Grep", "Agent"]\n', encoding="utf-8")
    out = tmp_path / "agent"
    done = skill_evals_run(fake, out, "--case", uid, "--repeats", "1", "--quorum", "1", "--config", str(config))
    assert done.returncode == 0, done.stdout + done.stderr
    result = case(results_of(out), uid)
    assert result["activation"]["state"] == "PASS", result
    [attempt] = attempts(out, uid)
    assert "security-reviewer (subagent)" in attempt["outcome"]["fired"]
    replay = asyncio.run(ReplayHost(out).run(spec(attempt_id=attempt["attempt_id"])))
    assert replay.fired() == attempt["outcome"]["fired"]


def test_the_api_host_and_its_replay_agree(tmp_path: Path) -> None:
    """The api host answers the same kind of calls itself (an Agent call: "No such tool available"; `plugin:name`:
    unknown skill, as the CLI answers it); the recogniser records them, and the replay of its transcript agrees."""
    library, _ = load_library(EXAMPLE, Settings())
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    prompt = "Find where secrets leaked from CI (api activation test 17)."
    with FakeAnthropic() as fake:
        fake.script(prompt[:40],
                    blocks("Checking.", tool("Skill", {"skill": "test-report-triage"})),
                    tool("Skill", {"skill": "no-such-skill"}),
                    tool("Skill", {"skill": "plugin:migration-planner"}),
                    tool("Read", {"file_path": ".claude/skills/migration-planner/SKILL.md"}),
                    tool("Read", {"file_path": ".claude/skills/gone/SKILL.md"}),
                    tool("Agent", {"subagent_type": "security-reviewer", "description": "review", "prompt": "r"}),
                    text("Delegated."))
        host = ApiHost(library, files, load_prices(Settings()), KEY, fake.url, None)

        async def main() -> Observation:
            try:
                return await host.run(spec(prompt=prompt))
            finally:
                await host.aclose()
        obs = asyncio.run(main())
    assert obs.ok, obs.error_message
    assert acts(obs.activations) == [
        ("test-report-triage", "skill-tool", 0, False),
        ("no-such-skill", "skill-tool", 1, True),
        ("migration-planner", "skill-tool", 2, True),
        ("migration-planner", "skill-md-read", 3, False),
        ("gone", "skill-md-read", 4, True),
        ("security-reviewer (subagent)", "subagent", 5, True),
    ]
    assert obs.fired() == ["test-report-triage", "migration-planner"]
    replay = replayed(tmp_path, obs.transcript, fired=obs.fired())
    assert acts(replay.activations) == acts(obs.activations) and replay.fired() == obs.fired()
