"""The opencode host's reader and surface on what OpenCode 1.18.33 printed and sent (fast: no CLI is started).

tests/data/opencode/*.jsonl: `opencode run --format json` output recorded against a local fake (issue 36's research:
a completed skill call, one auto-rejected under `"skill": "ask"`, one that failed without ripgrep, one with the
skill tool denied). The end-to-end tests are tests/test_host_opencode.py.
"""

from __future__ import annotations

from pathlib import Path

from runner.hosts.opencode import OpenCodeReader, surface_of

RECORDED = Path(__file__).parent / "data" / "opencode"


def read(name: str) -> OpenCodeReader:
    reader = OpenCodeReader(aliases={})
    for line in (RECORDED / name).read_text(encoding="utf-8").splitlines():
        reader.line(line)
    return reader


def test_a_skill_call_auto_rejected_under_ask_never_fires_and_the_session_did_not_end() -> None:
    """`"permission": {"skill": "ask"}` without --auto: OpenCode rejects the call, stops, and exits 0."""
    outcome = read("run-skill-ask-autorejected.jsonl").outcome()
    assert [(a.name, a.rejected) for a in outcome.activations] == [("demo-skill", True)]
    assert outcome.ended is False and outcome.final_answer is None and outcome.error_kind is None


def test_a_skill_call_that_failed_never_fires() -> None:
    """No `rg` on PATH: OpenCode's skill tool failed ("ripgrep execution failed"); the session went on."""
    outcome = read("run-skill-error-no-rg.jsonl").outcome()
    assert [(a.name, a.rejected) for a in outcome.activations] == [("demo-skill", True)]
    assert outcome.ended is True and outcome.final_answer == "DEMO-ACTIVATED summary"


def test_a_denied_skill_tool_is_no_activation() -> None:
    """`"skill": "deny"`: OpenCode answers the call as its `invalid` tool: no skill call at all."""
    outcome = read("run-skill-deny-invalid.jsonl").outcome()
    assert outcome.activations == [] and [c.name for c in outcome.tool_calls] == ["invalid"]


def test_a_completed_skill_call_fires_and_usage_is_summed_over_steps() -> None:
    outcome = read("run-skill-ok.jsonl").outcome()
    assert [(a.name, a.rejected) for a in outcome.activations] == [("demo-skill", False)]
    assert outcome.ended is True and outcome.model_calls == 2
    assert (outcome.usage.input_tokens, outcome.usage.output_tokens) == (200, 20)


def test_an_api_error_event_is_the_sessions_error() -> None:
    reader = OpenCodeReader(aliases={})
    reader.line('{"type":"error","sessionID":"s","error":{"name":"APIError","data":{"message":"bad",'
                '"statusCode":400,"isRetryable":false,"responseBody":"{\\"type\\":\\"error\\",\\"error\\":'
                '{\\"type\\":\\"invalid_request_error\\",\\"message\\":\\"bad\\"}}"}}}')
    outcome = reader.outcome()
    assert outcome.error_kind == "api-error" and outcome.ended is False


def test_the_surface_skips_a_title_request_and_reads_the_system_listing() -> None:
    title = {"system": [{"type": "text", "text": "You are a title generator."}], "messages": []}
    session = {"system": [{"type": "text", "text": "x\n<available_skills>\n  <skill>\n    <name>a</name>\n"
                                                   "    <description>does &lt;a&gt;</description>\n    <location>/p"
                                                   "</location>\n  </skill>\n  <skill>\n    <name>b</name>\n"
                                                   "    <description></description>\n  </skill>\n"
                                                   "</available_skills>"}],
               "tools": [{"name": "skill"}], "messages": [{"role": "user", "content": "hi"}]}
    surface = surface_of([title, session], {"a", "b", "c"}, {"a", "b", "c"})
    assert (surface.with_description, surface.name_only, surface.missing) == (["a"], ["b"], ["c"])


# OpenCode's log lines (stderr with --print-logs --log-level WARN) for a failed request it retried, as 1.18.33
# printed them against the fake: a cut stream, a body that is not JSON, an HTTP 500 (message "boom").
CUT = ('timestamp=2026-12-07T09:49:03.999Z level=ERROR run=fdee0e0a message="stream error" providerID=anthropic '
       'modelID=claude-sonnet-4-5 session.id=ses_db017eae6ffeAPWs6GOTCOls0N small=false agent=build mode=primary '
       'error.error="AI_APICallError: Cannot connect to API: The socket connection was closed unexpectedly. For more '
       'information, pass `verbose: true` in the second argument to fetch() (cause: Error: The socket connection was '
       'closed unexpectedly"')
NOT_JSON = ('timestamp=2026-12-07T09:54:19.582Z level=ERROR run=faaa0c11 message="stream error" providerID=anthropic '
            'modelID=claude-sonnet-4-5 session.id=ses_db0131425ffeZTzV5cd5zpRje1 small=false agent=build '
            'mode=primary error.error="AI_APICallError: JSON parsing failed: Text: {this is not json.\\nError '
            "message: JSON Parse error: Expected '}'\"")
HTTP_500 = ('timestamp=2026-12-07T09:52:07.662Z level=ERROR run=8d71a395 message="stream error" providerID=anthropic '
            'modelID=claude-sonnet-4-5 session.id=ses_db01519e9ffejzS4AHri49lY18 small=false agent=build '
            'mode=primary error.error="AI_APICallError: boom"')


def test_a_retried_reply_the_api_began_is_a_lost_reply_and_an_http_error_is_not(tmp_path: Path) -> None:
    (tmp_path / "opencode.log").write_text("\n".join((CUT, HTTP_500, NOT_JSON)) + "\n", encoding="utf-8")
    reader = OpenCodeReader(aliases={}, log_dir=tmp_path)
    for line in (RECORDED / "run-skill-ok.jsonl").read_text(encoding="utf-8").splitlines():
        reader.line(line)
    outcome = reader.outcome()
    assert outcome.lost_replies == 2  # the cut stream and the body that was not JSON; the 500 was not billed
    assert outcome.ended is True and outcome.error_kind is None


def test_a_turn_past_max_turns_is_the_max_turns_bound() -> None:
    """The last allowed request finished asking for tools: OpenCode sends the next one at once."""
    lines = (RECORDED / "run-skill-ok.jsonl").read_text(encoding="utf-8").splitlines()
    reader = OpenCodeReader(aliases={}, max_turns=1)
    for line in lines[:2]:
        reader.line(line)
    assert reader.over() is None  # the skill call is in, its step not finished
    reader.line(lines[2])  # step_finish, reason tool-calls
    assert reader.over() == "max-turns"
    whole = OpenCodeReader(aliases={}, max_turns=2)
    for line in lines:
        whole.line(line)
    assert whole.over() is None  # two requests, the second ended the session
