"""The gemini host's reader and surface parser on lines the real Gemini CLI 0.61.0 printed (fast: no CLI runs here;
tests/test_host_gemini.py runs it end to end).

Every stream below was printed by `gemini -m gemini-2.5-flash --output-format stream-json` against
runner.testing.fake_gemini (2026-12-07); timestamps, session ids and folder names are as printed, long tool outputs
are shortened. The chat-log lines are the CLI's own session log records (`~/.gemini/tmp/<project>/chats/`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.core.errors import UsageError
from runner.core.observation import SessionSpec
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.gemini import (
    ChatTokens,
    GeminiCli,
    GeminiReader,
    chat_tokens,
    result_error,
    session_settings,
    surface_of,
    tool_policy,
)
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs, make_host
from tests.conftest import EXAMPLE

INIT = ('{"type":"init","timestamp":"2026-12-07T09:28:04.101Z","session_id":"73ea2e9e-2aa6-4331-a511-0b64aee35e20",'
        '"model":"gemini-2.5-flash"}')


def user(text: str) -> str:
    return json.dumps({"type": "message", "timestamp": "2026-12-07T09:28:04.104Z", "role": "user", "content": text})


SKILL_FIRES = [
    INIT, user("ACTIVATE demo please"),
    '{"type":"tool_use","timestamp":"2026-12-07T09:28:04.202Z","tool_name":"activate_skill","tool_id":'
    '"activate_skill__activate_skill_1796635684150_0","parameters":{"name":"demo-skill"}}',
    '{"type":"tool_result","timestamp":"2026-12-07T09:28:04.250Z","tool_id":"activate_skill__activate_skill_'
    '1796635684150_0","status":"success","output":"Skill **demo-skill** activated. Resources loaded from '
    '`/tmp/hG-scratch/s-skill/project/.agents/skills/demo-skill`"}',
    '{"type":"message","timestamp":"2026-12-07T09:28:04.263Z","role":"assistant","content":"final answer aft",'
    '"delta":true}',
    '{"type":"message","timestamp":"2026-12-07T09:28:04.264Z","role":"assistant","content":"er skill","delta":true}',
    '{"type":"result","timestamp":"2026-12-07T09:28:04.266Z","status":"success","stats":{"total_tokens":12124,'
    '"input_tokens":12093,"output_tokens":31,"cached":0,"input":12093,"duration_ms":165,"tool_calls":1,"models":'
    '{"gemini-2.5-flash":{"total_tokens":12124,"input_tokens":12093,"output_tokens":31,"cached":0,"input":12093}}}}',
]
SKILL_FIRES_LOG = [
    '{"id":"7db56652-3226-49d7-befe-004a0d0f6c86","timestamp":"2026-12-07T09:28:04.238Z","type":"gemini","content":"",'
    '"thoughts":[],"tokens":{"input":5963,"output":15,"cached":0,"thoughts":0,"tool":0,"total":5978},'
    '"model":"gemini-2.5-flash"}',
    '{"$set":{"lastUpdated":"2026-12-07T09:28:04.238Z"}}',
    '{"id":"7db56652-3226-49d7-befe-004a0d0f6c86","timestamp":"2026-12-07T09:28:04.238Z","type":"gemini","content":"",'
    '"thoughts":[],"tokens":{"input":5963,"output":15,"cached":0,"thoughts":0,"tool":0,"total":5978},'
    '"model":"gemini-2.5-flash","toolCalls":[{"id":"activate_skill__activate_skill_1796635684150_0",'
    '"name":"activate_skill","args":{"name":"demo-skill"}}]}',
    '{"id":"b3185cbc-a77e-437b-b9a1-1cfb4b79e0f3","timestamp":"2026-12-07T09:28:04.253Z","type":"user","content":'
    '[{"functionResponse":{"name":"activate_skill","response":{"output":"<activated_skill name=\\"demo-skill\\">"}}}]}',
    '{"id":"fa79f7bf-33ba-4dcb-9997-40bef5b10c73","timestamp":"2026-12-07T09:28:04.265Z","type":"gemini","content":'
    '"final answer after skill","thoughts":[],"tokens":{"input":6130,"output":16,"cached":0,"thoughts":0,"tool":0,'
    '"total":6146},"model":"gemini-2.5-flash"}',
]
UNKNOWN_SKILL = [
    INIT, user("BAD skill"),
    '{"type":"tool_use","timestamp":"2026-12-07T09:28:18.538Z","tool_name":"activate_skill","tool_id":"activate_skill'
    '__activate_skill_1796635698306_0","parameters":{"name":"no-such-skill"}}',
    '{"type":"tool_result","timestamp":"2026-12-07T09:28:18.713Z","tool_id":"activate_skill__activate_skill_'
    '1796635698306_0","status":"error","output":"params/name must be equal to one of the allowed values","error":'
    '{"type":"invalid_tool_params","message":"params/name must be equal to one of the allowed values"}}',
    '{"type":"message","timestamp":"2026-12-07T09:28:18.762Z","role":"assistant","content":"after bad","delta":true}',
    '{"type":"result","timestamp":"2026-12-07T09:28:18.770Z","status":"success","stats":{"total_tokens":12056,'
    '"input_tokens":12028,"output_tokens":28,"cached":0,"input":12028,"duration_ms":592,"tool_calls":1,"models":{}}}',
]
# Without the host's policy (the CLI's default headless policy): activate_skill is not offered, a call is refused.
DENIED_BY_POLICY = [
    INIT, user("DENY skill"),
    '{"type":"tool_use","timestamp":"2026-12-07T09:28:18.344Z","tool_name":"activate_skill","tool_id":"activate_skill'
    '__activate_skill_1796635698342_0","parameters":{"name":"demo-skill"}}',
    '{"type":"tool_result","timestamp":"2026-12-07T09:28:18.579Z","tool_id":"activate_skill__activate_skill_'
    '1796635698342_0","status":"error","output":"Tool \\"activate_skill\\" not found. Did you mean one of: '
    '\\"update_topic\\", \\"read_file\\", \\"invoke_agent\\"?","error":{"type":"tool_not_registered","message":'
    '"Tool \\"activate_skill\\" not found."}}',
    '{"type":"message","timestamp":"2026-12-07T09:28:18.662Z","role":"assistant","content":"after deny","delta":true}',
    '{"type":"result","timestamp":"2026-12-07T09:28:18.685Z","status":"success","stats":{"total_tokens":12071,'
    '"input_tokens":12044,"output_tokens":27,"cached":0,"input":12044,"duration_ms":491,"tool_calls":1,"models":{}}}',
]
READ_SKILL_MD = [
    INIT, user("READ skill"),
    '{"type":"tool_use","timestamp":"2026-12-07T09:34:15.122Z","tool_name":"read_file","tool_id":"read_file__read_file'
    '_1796636055044_0","parameters":{"file_path":".agents/skills/demo-skill/SKILL.md"}}',
    '{"type":"tool_result","timestamp":"2026-12-07T09:34:15.304Z","tool_id":"read_file__read_file_1796636055044_0",'
    '"status":"success","output":""}',
    '{"type":"tool_use","timestamp":"2026-12-07T09:34:15.320Z","tool_name":"read_file","tool_id":"read_file__read_file'
    '_1796636055319_0","parameters":{"file_path":".agents/skills/other-skill/NOPE.md"}}',
    '{"type":"tool_result","timestamp":"2026-12-07T09:34:15.323Z","tool_id":"read_file__read_file_1796636055319_0",'
    '"status":"error","output":"File not found.","error":{"type":"file_not_found","message":"File not found: '
    '/tmp/hG-scratch/s-readskill/project/.agents/skills/other-skill/NOPE.md"}}',
    '{"type":"message","timestamp":"2026-12-07T09:34:15.365Z","role":"assistant","content":"read done","delta":true}',
    '{"type":"result","timestamp":"2026-12-07T09:34:15.366Z","status":"success","stats":{"total_tokens":18297,'
    '"input_tokens":18241,"output_tokens":56,"cached":0,"input":18241,"duration_ms":376,"tool_calls":2,"models":{}}}',
]
ZERO_STATS = ('"stats":{"total_tokens":0,"input_tokens":0,"output_tokens":0,"cached":0,"input":0,"duration_ms":0,'
              '"tool_calls":0,"models":{"gemini-2.5-flash":{"total_tokens":0,"input_tokens":0,"output_tokens":0,'
              '"cached":0,"input":0}}}')
SERVER_500 = [
    INIT, user("FAIL please"),
    '{"type":"result","timestamp":"2026-12-07T09:28:18.650Z","status":"error","error":{"type":"unknown","message":'
    '"[API Error: {\\"error\\":{\\"code\\":500,\\"message\\":\\"An internal error has occurred. (fake)\\",'
    '\\"status\\":\\"INTERNAL\\"}}]"},' + ZERO_STATS + '}',
]
QUOTA_429 = [
    INIT, user("LIMIT please"),
    '{"type":"result","timestamp":"2026-12-07T09:28:18.307Z","status":"error","error":{"type":"unknown","message":'
    '"[API Error: Resource has been exhausted (e.g. check quota). (fake)]\\nPlease wait and try again later. To '
    'increase your limits, request a quota increase through AI Studio, or switch to another /auth method"},'
    + ZERO_STATS + '}',
]
CUT_STREAM = [
    INIT, user("CUT please"),
    '{"type":"message","timestamp":"2026-12-07T09:28:17.558Z","role":"assistant","content":"Partial ans",'
    '"delta":true}',
    '{"type":"result","timestamp":"2026-12-07T09:28:17.710Z","status":"error","error":{"type":"unknown","message":'
    '"[API Error: terminated]"},' + ZERO_STATS + '}',
]
TURN_LIMIT = [
    INIT, user("LOOP read"),
    '{"type":"tool_use","timestamp":"2026-12-07T09:34:12.895Z","tool_name":"read_file","tool_id":"read_file__read_file'
    '_1796636052688_0","parameters":{"file_path":".agents/skills/demo-skill/SKILL.md"}}',
    '{"type":"tool_result","timestamp":"2026-12-07T09:34:13.022Z","tool_id":"read_file__read_file_1796636052688_0",'
    '"status":"success","output":""}',
    '{"type":"result","timestamp":"2026-12-07T09:34:13.023Z","status":"error","error":{"type":"FatalTurnLimitedError",'
    '"message":"Reached max session turns for this session. Increase the number of turns by specifying '
    'maxSessionTurns in settings.json."},"stats":{"total_tokens":5986,"input_tokens":5964,"output_tokens":22,'
    '"cached":0,"input":5964,"duration_ms":0,"tool_calls":1,"models":{}}}',
]
EMPTY_REPLY = [
    INIT, user("EMPTY reply"),
    '{"type":"error","timestamp":"2026-12-07T09:34:17.921Z","severity":"error","message":"The model returned an empty '
    'response with no text or thoughts. This may be a transient API issue; please try again."}',
    '{"type":"result","timestamp":"2026-12-07T09:34:17.926Z","status":"error","stats":{"total_tokens":5970,'
    '"input_tokens":5960,"output_tokens":10,"cached":0,"input":5960,"duration_ms":170,"tool_calls":0,"models":{}}}',
]


def read(lines: list[str], home: Path, log: list[str] | None = None, aliases: dict[str, str] | None = None):
    if log is not None:
        chats = home / ".gemini" / "tmp" / "project" / "chats"
        chats.mkdir(parents=True)
        (chats / "session-2026-12-07T09-28-73ea2e9e.jsonl").write_text("\n".join(log) + "\n", encoding="utf-8")
    reader = GeminiReader(home=home, aliases=aliases or {})
    for line in lines:
        reader.line(line)
    return reader.outcome()


def test_an_accepted_activate_skill_call_fires_and_the_log_gives_each_calls_figures(tmp_path: Path) -> None:
    outcome = read(SKILL_FIRES, tmp_path, SKILL_FIRES_LOG)
    assert [(a.name, a.mechanism, a.turn, a.rejected) for a in outcome.activations] == [
        ("demo-skill", "skill-tool", 0, False)]
    assert outcome.activations[0].tool_use_id == "activate_skill__activate_skill_1796635684150_0"
    assert [(c.name, c.input, c.turn, c.is_error) for c in outcome.tool_calls] == [
        ("activate_skill", '{"name": "demo-skill"}', 0, False)]
    assert outcome.final_answer == "final answer after skill"
    assert outcome.ended and outcome.error_kind is None and outcome.bounds_hit == []
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (12093, 31)  # result.stats
    assert outcome.model_calls == 2 and outcome.turns == 2
    assert outcome.first_turn_input_tokens == 5963  # the log's first reply (its record written twice counts once)
    assert len(outcome.transcript) == len(SKILL_FIRES)


def test_a_refused_call_is_rejected_whether_the_name_is_unknown_or_the_policy_denies_the_tool(tmp_path: Path) -> None:
    for lines, name in ((UNKNOWN_SKILL, "no-such-skill"), (DENIED_BY_POLICY, "demo-skill")):
        outcome = read(lines, tmp_path / name)
        assert [(a.name, a.rejected) for a in outcome.activations] == [(name, True)]
        assert [c.is_error for c in outcome.tool_calls] == [True]
        assert outcome.error_kind is None and outcome.final_answer is not None


def test_a_skill_md_read_is_an_activation_and_a_failed_read_of_another_file_is_none(tmp_path: Path) -> None:
    outcome = read(READ_SKILL_MD, tmp_path)
    assert [(a.name, a.mechanism, a.rejected) for a in outcome.activations] == [("demo-skill", "skill-md-read", False)]
    assert [(c.name, c.turn, c.is_error) for c in outcome.tool_calls] == [("read_file", 0, False),
                                                                          ("read_file", 1, True)]
    assert outcome.turns == 3 and outcome.final_answer == "read done"


def test_api_errors_rate_limits_and_cut_streams_are_told_apart(tmp_path: Path) -> None:
    failed = read(SERVER_500, tmp_path / "500")
    assert failed.error_kind == "api-error" and "INTERNAL" in (failed.error_message or "")
    limited = read(QUOTA_429, tmp_path / "429")
    assert limited.error_kind == "rate-limited"
    cut = read(CUT_STREAM, tmp_path / "cut")
    assert cut.error_kind == "api-error" and "cut" in (cut.error_message or "")
    assert all(o.ended and o.activations == [] for o in (failed, limited, cut))
    assert cut.usage.input_tokens == 0 and cut.model_calls == 1  # a reply began, no figure came


def test_the_turn_limit_is_a_bound_and_an_unusable_reply_is_malformed(tmp_path: Path) -> None:
    limited = read(TURN_LIMIT, tmp_path / "turns")
    assert limited.error_kind is None and limited.bounds_hit == ["max-turns"]
    assert limited.activations[0].name == "demo-skill" and limited.final_answer is None
    empty = read(EMPTY_REPLY, tmp_path / "empty")
    assert empty.error_kind == "malformed" and "empty response" in (empty.error_message or "")
    assert empty.usage.input_tokens == 5960  # the unusable reply is not in the log, but the CLI counted it


def test_a_killed_session_takes_its_usage_from_the_log_with_thinking_as_output(tmp_path: Path) -> None:
    thinking = SKILL_FIRES_LOG[0].replace('"cached":0,"thoughts":0', '"cached":1000,"thoughts":40')
    outcome = read(SKILL_FIRES[:4], tmp_path, [thinking])
    assert not outcome.ended and outcome.error_kind is None
    assert (outcome.usage.input_tokens, outcome.usage.cache_read_input_tokens, outcome.usage.output_tokens) == (
        4963, 1000, 55)
    assert chat_tokens(tmp_path) == [ChatTokens(input=5963, output=15, cached=1000, thoughts=40)]


def test_output_that_is_not_json_is_malformed_only_when_nothing_else_came(tmp_path: Path) -> None:
    noise = read(["Ripgrep is not available. Falling back to GrepTool.", *SKILL_FIRES], tmp_path / "a")
    assert noise.error_kind is None and noise.transcript[0]["type"] == "unreadable"
    nothing = read(["Invalid auth method selected."], tmp_path / "b")
    assert nothing.error_kind == "malformed" and not nothing.ended


def test_an_undescribed_error_result_is_ambiguous() -> None:
    assert result_error({"type": "FatalCancellationError", "message": "Operation cancelled."})[0] == "ambiguous"
    assert result_error(None)[0] == "ambiguous"


# The system instruction's listing as 0.61.0 renders it (renderAgentSkills), two library skills and one built-in.
LISTING = """# Available Agent Skills

You have access to the following specialized skills. To activate a skill and receive its detailed instructions, you \
can call the `activate_skill` tool with the skill's name.

<available_skills>
  <skill>
    <name>skill-creator</name>
    <description>Guide for creating effective skills.</description>
    <location>/x/bundle/builtin/skill-creator/SKILL.md</location>
  </skill>
  <skill>
    <name>demo-skill</name>
    <description>Summarise quarterly invoice reports.</description>
    <location>/tmp/p/.agents/skills/demo-skill/SKILL.md</location>
  </skill>
  <skill>
    <name>quiet-skill</name>
    <description></description>
    <location>/tmp/p/.agents/skills/quiet-skill/SKILL.md</location>
  </skill>
  <skill>
    <name>Renamed Skill</name>
    <description>Its frontmatter name is not its folder's.</description>
    <location>/tmp/p/.agents/skills/renamed/SKILL.md</location>
  </skill>
</available_skills>"""


def chat_body(system: str) -> dict:
    return {"contents": [{"role": "user", "parts": [{"text": "<session_context>...</session_context>"},
                                                    {"text": "Surface audit"}]}],
            "systemInstruction": {"role": "user", "parts": [{"text": "You are Gemini CLI.\n\n" + system}]},
            "tools": [{"functionDeclarations": [{"name": "read_file"}, {"name": "activate_skill"}]}]}


def test_the_surface_reads_the_listing_of_the_first_chat_request() -> None:
    classifier = {"contents": [{"role": "user", "parts": [{"text": "route this"}]}],
                  "systemInstruction": {"parts": [{"text": "You are a specialized Task Routing AI"}]}}
    names = {"demo-skill", "quiet-skill", "absent-skill", "renamed"}
    surface = surface_of([classifier, chat_body(LISTING)], names, names)
    assert surface.error is None
    assert surface.with_description == ["demo-skill", "renamed"] and surface.name_only == ["quiet-skill"]
    assert surface.not_from_library == ["skill-creator"] and surface.missing == ["absent-skill"]
    assert surface.tools == ["read_file", "activate_skill"] and surface.listing_budget_chars is None
    assert surface.listing_chars == len(LISTING[LISTING.index("<available_skills>"):])
    without = surface_of([chat_body("no skills here")], {"demo-skill"}, {"demo-skill"})
    assert without.error is not None and without.missing == ["demo-skill"]
    assert surface_of([classifier], {"a"}, {"a"}).error is not None


def test_session_settings_pin_the_auth_bound_the_attempts_and_switch_off_only_builtins_the_library_lacks() -> None:
    spec = SessionSpec(attempt_id="a", uid="s/x/1", prompt="p", model="gemini-2.5-flash", max_turns=4, timeout_s=9)
    settings = session_settings(spec, 3, {"demo-skill"}, ["activate_skill", "read_file"])
    assert settings["tools"] == {"core": ["activate_skill", "read_file"]}
    assert settings["security"] == {"auth": {"selectedType": "gemini-api-key"}}
    assert settings["privacy"] == {"usageStatisticsEnabled": False} and settings["telemetry"] == {"enabled": False}
    assert settings["general"]["maxAttempts"] == 3 and settings["model"] == {"maxSessionTurns": 4}
    assert settings["skills"] == {"enabled": True, "disabled": ["skill-creator", "antigravity-support"]}
    # The library's own skill-creator outranks the built-in one, so it is not switched off; attempts are 1..10.
    assert session_settings(spec, 99, {"skill-creator"}, [])["skills"]["disabled"] == ["antigravity-support"]
    assert session_settings(spec, 99, set(), [])["general"]["maxAttempts"] == 10
    assert session_settings(spec, 0, set(), [])["general"]["maxAttempts"] == 1


def test_the_runs_tools_become_the_clis_names_and_each_is_allowed_headless() -> None:
    cli = GeminiCli(Path("/nowhere/gemini"), allowed_tools=["Skill", "Read", "Bash", "Task", "TodoWrite", "Read"])
    assert cli.tools == ["activate_skill", "read_file", "run_shell_command"]  # no equivalent: left out
    policy = tool_policy(cli.tools)
    assert policy.count("[[rule]]") == 3 and policy.count('decision = "allow"') == 3
    assert 'toolName = "activate_skill"' in policy and "priority = 100" in policy


def test_an_anthropic_key_is_never_handed_to_the_gemini_host(tmp_path: Path) -> None:
    """The run's key is a Messages API key today; the gemini host refuses it before any session could send it."""
    library, _ = load_library(EXAMPLE, Settings())
    inputs = HostInputs(library, Settings(), load_prices(Settings()), "sk-ant-api03-not-a-real-key", None,
                        run_folder=tmp_path / "run")
    with pytest.raises(UsageError, match="Anthropic API key"):
        make_host("gemini", inputs)
