"""The fake Messages API speaks the real protocol: proven with the real `anthropic` SDK and the real
Claude Code CLI (bundled in the claude-agent-sdk wheel), never with mocks, never over the internet."""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from runner.testing.fake_anthropic import (
    CUT_REPLY,
    FakeAnthropic,
    Usage,
    blocks,
    break_stream,
    error,
    first_user_text,
    hang,
    input_tokens_for,
    malformed,
    odd_message,
    output_tokens_for,
    reset,
    skill,
    stream_error,
    text,
    tool,
)

anthropic = pytest.importorskip("anthropic", reason="the anthropic SDK is not installed (pip install anthropic)")

MODEL = "claude-fake-model"


def client(fake: FakeAnthropic, max_retries: int = 0, timeout: float = 10.0):
    return anthropic.Anthropic(base_url=fake.url, api_key="test-key", max_retries=max_retries, timeout=timeout)


def ask(c, prompt: str, stream: bool, messages: list | None = None, **kw):
    """One Messages call, streamed (`messages.stream` + `get_final_message`) or not."""
    args = {"model": MODEL, "max_tokens": 256, "messages": messages or [{"role": "user", "content": prompt}], **kw}
    if stream:
        with c.messages.stream(**args) as s:
            return s.get_final_message()
    return c.messages.create(**args)


def raw_post(fake: FakeAnthropic, path: str, body: dict, timeout: float = 5.0) -> tuple[int, dict, bytes]:
    request = urllib.request.Request(fake.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def sse_events(raw: bytes) -> list[tuple[str, dict]]:
    events = []
    for chunk in raw.decode().split("\n\n"):
        if not chunk.strip():
            continue
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


STREAM = pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])


# ---------------------------------------------------------------------------------------------
# The anthropic SDK against the fake
# ---------------------------------------------------------------------------------------------

def test_non_stream_text() -> None:
    with FakeAnthropic() as fake:
        fake.script("hello there", text("general kenobi"))
        message = client(fake).messages.create(model=MODEL, max_tokens=64,
                                               messages=[{"role": "user", "content": "hello there"}])
    assert isinstance(message, anthropic.types.Message)
    assert [b.type for b in message.content] == ["text"]
    assert message.content[0].text == "general kenobi"
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    assert message.id == "msg_fake_000001"
    assert message._request_id == "req_fake_1"
    [recorded] = fake.requests
    assert (recorded.method, recorded.path, recorded.query) == ("POST", "/v1/messages", "")
    assert not recorded.body.get("stream")
    # anthropic 2.14 sends the key as `authorization: Bearer`; older SDKs (and the CLI) as `x-api-key`
    assert "test-key" in (recorded.headers.get("x-api-key", ""), recorded.headers.get("authorization", "")[7:])
    assert recorded.script == "hello there" and recorded.turn == 0 and recorded.outcome == "text"


def test_stream_text() -> None:
    with FakeAnthropic() as fake:
        fake.script("stream me", text("a streamed reply that is longer than one sixteen-char chunk"))
        with client(fake).messages.stream(model=MODEL, max_tokens=64,
                                          messages=[{"role": "user", "content": "stream me"}]) as s:
            pieces = list(s.text_stream)
            final = s.get_final_message()
    assert len(pieces) > 1
    assert "".join(pieces) == "a streamed reply that is longer than one sixteen-char chunk"
    assert final.content[0].text == "".join(pieces)
    assert final.stop_reason == "end_turn" and final.model == MODEL
    assert fake.requests[0].body["stream"] is True


@STREAM
def test_tool_use_block(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("use the tool", tool("lookup", {"query": "weather in Paris", "limit": 3, "deep": {"a": [1, 2]}}))
        message = ask(client(fake), "please use the tool", stream)
    [block] = message.content
    assert isinstance(block, anthropic.types.ToolUseBlock)
    assert block.name == "lookup" and block.id == "toolu_fake_000001"
    assert block.input == {"query": "weather in Paris", "limit": 3, "deep": {"a": [1, 2]}}
    assert message.stop_reason == "tool_use"


@STREAM
def test_blocks_text_then_skill_with_given_id(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("mixed", blocks(text("Let me load it."), tool("Skill", {"skill": "pdf"}, id="toolu_mine")))
        message = ask(client(fake), "mixed turn", stream)
    assert [b.type for b in message.content] == ["text", "tool_use"]
    assert message.content[0].text == "Let me load it."
    assert (message.content[1].id, message.content[1].name, message.content[1].input) == \
        ("toolu_mine", "Skill", {"skill": "pdf"})
    assert message.stop_reason == "tool_use"


@STREAM
def test_usage_default_formula_and_scripted(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("formula", text("twelve chars"))
        fake.script("fixed", skill("x"), usage=Usage(input_tokens=1234, output_tokens=56, cache_read_input_tokens=7))
        c = client(fake)
        m1 = ask(c, "usage formula please", stream, system="be brief")
        m2 = ask(c, "fixed usage", stream)
    body = fake.requests[0].body
    assert m1.usage.input_tokens == input_tokens_for(body) == \
        max(1, len(json.dumps(body["messages"]) + json.dumps("be brief")) // 4)
    assert m1.usage.output_tokens == output_tokens_for(text("twelve chars")) == 10 + 12 // 4
    assert (m1.usage.cache_creation_input_tokens, m1.usage.cache_read_input_tokens) == (0, 0)
    assert (m2.usage.input_tokens, m2.usage.output_tokens) == (1234, 56)
    assert (m2.usage.cache_creation_input_tokens, m2.usage.cache_read_input_tokens) == (0, 7)


def test_turn_index_follows_assistant_messages_and_past_end_is_done() -> None:
    with FakeAnthropic() as fake:
        fake.script("multi", skill("alpha"), text("second"))
        c = client(fake)
        first = ask(c, "multi turn", False)
        history = [{"role": "user", "content": "multi turn"},
                   {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
                   {"role": "user", "content": [{"type": "tool_result", "tool_use_id": first.content[0].id,
                                                 "content": "Launching skill: alpha"}]}]
        second = ask(c, "", True, messages=history)
        history += [{"role": "assistant", "content": "second"}, {"role": "user", "content": "and?"}]
        third = ask(c, "", False, messages=history)
    assert first.content[0].input == {"skill": "alpha"}
    assert second.content[0].text == "second"
    assert third.content[0].text == "done" and third.stop_reason == "end_turn"
    assert [r.turn for r in fake.requests] == [0, 1, 2]
    assert len(fake.requests_for("multi")) == 3


def test_script_matching_first_user_message_blocks_and_default() -> None:
    reminder = {"type": "text", "text": "<system-reminder>\nsome context\n</system-reminder>"}
    with FakeAnthropic() as fake:
        fake.script("needle", text("first"))
        fake.script("needle in", text("second registered, never chosen"))
        fake.script("context", text("matched inside the reminder block"))
        c = client(fake)
        a = ask(c, "", False,
                messages=[{"role": "user", "content": [reminder, {"type": "text", "text": "a needle in"}]}])
        b = ask(c, "", False, messages=[{"role": "user", "content": [{"type": "text", "text": "no match here"}]}])
        fake.default(text("new default"))
        d = ask(c, "still nothing", True)
    # "context" is in the reminder block, but "needle" was registered first and also matches
    assert a.content[0].text == "first"
    assert b.content[0].text == "ok"
    assert d.content[0].text == "new default"
    assert first_user_text(fake.requests[0].body).startswith("<system-reminder>")
    assert [r.script for r in fake.requests] == ["needle", None, None]
    with FakeAnthropic() as fake:
        fake.script("context", text("matched inside the reminder block"))
        e = ask(client(fake), "", False,
                messages=[{"role": "user", "content": [reminder, {"type": "text", "text": "x"}]}])
    assert e.content[0].text == "matched inside the reminder block"


@STREAM
def test_529_once_is_retried_by_the_sdk(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("flaky", error(529, "overloaded_error", times=1), text("ok after retry"), text("turn one"))
        message = ask(client(fake, max_retries=2), "flaky call", stream)
    assert message.content[0].text == "ok after retry"
    assert [r.outcome for r in fake.requests] == ["error 529", "text"]
    assert [r.turn for r in fake.requests] == [0, 0]
    assert [r.headers.get("x-stainless-retry-count") for r in fake.requests] == ["0", "1"]


@STREAM
def test_500_every_time_raises_internal_server_error(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("broken", error(500, message="boom", retry_after=0.01))
        with pytest.raises(anthropic.InternalServerError) as info:
            ask(client(fake, max_retries=2), "broken backend", stream)
    assert len(fake.requests) == 1 + 2
    assert info.value.status_code == 500
    assert info.value.body == {"type": "error", "error": {"type": "api_error", "message": "boom"},
                               "request_id": "req_fake_3"}
    assert info.value.request_id == "req_fake_3"


def test_529_every_time_raises_overloaded_error() -> None:
    with FakeAnthropic() as fake:
        fake.script("busy", error(529, "overloaded_error"))
        with pytest.raises(anthropic.APIStatusError) as info:
            ask(client(fake, max_retries=0), "busy", False)
    assert info.value.status_code == 529
    assert type(info.value).__name__ == "OverloadedError"  # anthropic 2.x has a class for 529
    assert info.value.body["error"]["type"] == "overloaded_error"


def test_429_retry_after_is_honoured_then_rate_limit_error() -> None:
    with FakeAnthropic() as fake:
        fake.script("limited once", error(429, "rate_limit_error", retry_after=0.4, times=1), text("ok"))
        fake.script("spend limit", error(429, "rate_limit_error", message="spend limit reached"))
        c = client(fake, max_retries=2)
        assert ask(c, "limited once", False).content[0].text == "ok"
        first, second = fake.requests_for("limited once")
        assert second.time - first.time >= 0.4
        with pytest.raises(anthropic.RateLimitError) as info:
            ask(client(fake, max_retries=0), "spend limit", True)
    assert info.value.status_code == 429
    assert "retry-after" not in info.value.response.headers
    assert info.value.body["error"] == {"type": "rate_limit_error", "message": "spend limit reached"}


@STREAM
def test_malformed_body_raises_json_decode_error(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("garbage", malformed())
        with pytest.raises(json.JSONDecodeError):  # the SDK lets the raw ValueError through, no retry
            ask(client(fake, max_retries=2), "garbage please", stream)
    assert len(fake.requests) == 1


def test_break_stream_in_stream_mode_raises_protocol_error() -> None:
    with FakeAnthropic() as fake:
        fake.script("cut", break_stream())
        with pytest.raises(Exception) as info:
            ask(client(fake, max_retries=2), "cut me off", True)
    # The HTTP 200 already arrived, so the SDK does not retry; the transport error (httpx2) surfaces as-is (earlier
    # releases of the SDK) or as the cause of an APIConnectionError (newer ones: 2.17.0).
    error = info.value
    if isinstance(error, anthropic.APIConnectionError):
        error = error.__cause__
    assert type(error).__name__ == "RemoteProtocolError"
    assert "incomplete chunked read" in str(error)
    assert not isinstance(error, anthropic.APIError)
    assert len(fake.requests) == 1


def test_break_stream_in_json_mode_is_a_retried_connection_error() -> None:
    with FakeAnthropic() as fake:
        fake.script("cut once", break_stream(times=1), text("second try"))
        fake.script("always cut", break_stream())
        c = client(fake, max_retries=1)
        assert ask(c, "cut once", False).content[0].text == "second try"
        with pytest.raises(anthropic.APIConnectionError) as info:
            ask(client(fake, max_retries=0), "always cut", False)
    assert not isinstance(info.value, anthropic.APITimeoutError)
    assert len(fake.requests_for("cut once")) == 2


def test_hang_raises_api_timeout_error_and_does_not_block_shutdown() -> None:
    fake = FakeAnthropic().start()
    try:
        fake.script("slow", hang(30))
        with pytest.raises(anthropic.APITimeoutError):  # the hang answers "late" after 30 s: the timeout cut it
            ask(client(fake, max_retries=0, timeout=0.3), "slow answer", False)
        assert [r.outcome for r in fake.requests_for("slow")] == ["hang"]
        # A client that would wait the hang out is still waiting when the fake closes.
        pool = ThreadPoolExecutor(1)
        waiting = pool.submit(ask, client(fake, max_retries=0, timeout=120), "slow again", False)
        for _ in range(600):  # a bound against a hang, not a measurement
            if len(fake.requests_for("slow")) == 2:
                break
            time.sleep(0.05)
        assert [r.outcome for r in fake.requests_for("slow")] == ["hang", "hang"]
    finally:
        fake.close()
    # Closing cut the hang: the waiting client lost its connection instead of getting the "late" reply after 30 s.
    with pytest.raises(anthropic.APIConnectionError) as info:
        waiting.result(timeout=120)
    pool.shutdown()
    assert not isinstance(info.value, anthropic.APITimeoutError)


@STREAM
def test_the_fake_bills_what_the_api_would_bill(stream: bool) -> None:
    """The Billing rule of the fake's docstring: a request it began a reply for is billed, input plus the whole
    reply's output, whether or not the client read it; an error status is not."""
    with FakeAnthropic() as fake:
        fake.script("cut", break_stream())
        fake.script("reset", reset())
        fake.script("null usage", odd_message(text("odd answer"), usage=None))
        fake.script("overloaded", error(529, "overloaded_error"))
        fake.script("fine", text("fine"))
        c = client(fake, max_retries=0, timeout=5)
        for prompt in ("cut", "reset", "null usage", "overloaded"):
            try:
                ask(c, f"{prompt} please", stream)
            except Exception:  # noqa: BLE001 - each fault ends the call its own way; what is billed is the point
                pass
        assert ask(c, "fine please", stream).usage.output_tokens == output_tokens_for(text("fine"))
        fake.script("slow", hang(30))
        with pytest.raises(anthropic.APITimeoutError):
            ask(client(fake, max_retries=0, timeout=0.3), "slow please", stream)
        billed = {b.script: b for b in fake.billed}
    assert sorted(billed) == ["cut", "fine", "null usage", "reset", "slow"]  # never the 529
    for name, reply in (("cut", CUT_REPLY), ("reset", CUT_REPLY), ("null usage", text("odd answer")),
                        ("slow", text("late")), ("fine", text("fine"))):
        body = {"messages": [{"role": "user", "content": f"{name} please"}]}
        assert billed[name].usage == Usage(input_tokens_for(body), output_tokens_for(reply)), name
        assert billed[name].model == MODEL and not billed[name].batch


def test_hang_shorter_than_timeout_answers_late() -> None:
    with FakeAnthropic() as fake:
        fake.script("slowish", hang(0.2))
        assert ask(client(fake, timeout=5), "slowish", True).content[0].text == "late"


@STREAM
def test_in_stream_error_event(stream: bool) -> None:
    with FakeAnthropic() as fake:
        fake.script("overload", stream_error("overloaded_error", "Overloaded"))
        with pytest.raises(anthropic.APIStatusError) as info:
            ask(client(fake), "overload mid-stream", stream)
    assert info.value.body["error"] == {"type": "overloaded_error", "message": "Overloaded"}
    # streamed: the error event arrives after HTTP 200; non-streamed: the matching status
    assert info.value.status_code == (200 if stream else 529)
    assert type(info.value).__name__ == ("APIStatusError" if stream else "OverloadedError")


def test_headers_latency_count_tokens_404_and_beta_query() -> None:
    with FakeAnthropic() as fake:
        c = client(fake)
        raw = c.messages.with_raw_response.create(model=MODEL, max_tokens=8,
                                                   messages=[{"role": "user", "content": "hi"}])
        assert raw.headers["request-id"] == "req_fake_1"
        assert raw.headers["anthropic-ratelimit-requests-remaining"].isdigit()
        assert raw.parse().content[0].text == "ok"

        counted = c.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "count me"}])
        assert counted.input_tokens == input_tokens_for(fake.requests[-1].body)
        assert fake.requests[-1].path == "/v1/messages/count_tokens"

        with pytest.raises(anthropic.NotFoundError) as info:
            c.models.list()
        assert info.value.body["error"]["type"] == "not_found_error"

        beta = c.beta.messages.create(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "beta"}],
                                      betas=["some-beta-2025-01-01"])
        assert beta.content[0].text == "ok"
        # the Python SDK's beta namespace sends only the header; Claude Code adds `?beta=true` (see the CLI test)
        assert fake.requests[-1].path == "/v1/messages"
        assert fake.requests[-1].headers["anthropic-beta"] == "some-beta-2025-01-01"

        # The latency holds a reply back: a client that will not wait that long times out on a request the fake
        # received; with a latency it waits out, the reply comes.
        fake.set_latency(60)
        with pytest.raises(anthropic.APITimeoutError):
            ask(client(fake, max_retries=0, timeout=0.5), "slow down", True)
        assert [r.outcome for r in fake.requests_for("slow down")] == ["text"]
        fake.set_latency(0.25)
        assert ask(c, "slow down again", True).content[0].text == "ok"


def test_raw_sse_event_sequence() -> None:
    with FakeAnthropic() as fake:
        fake.script("raw", blocks(text("hi"), tool("t", {"k": "v" * 30})))
        status, headers, raw = raw_post(fake, "/v1/messages?beta=true",
                                        {"model": MODEL, "max_tokens": 9, "stream": True,
                                         "messages": [{"role": "user", "content": "raw"}]})
        bad_status, _, bad = raw_post(fake, "/v1/other", {})
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    events = sse_events(raw)
    names = [n for n, _ in events]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert all(data["type"] == name for name, data in events)
    assert events[0][1]["message"]["content"] == [] and events[0][1]["message"]["stop_reason"] is None
    json_parts = [d["delta"]["partial_json"] for n, d in events
                  if n == "content_block_delta" and d["delta"]["type"] == "input_json_delta"]
    assert len(json_parts) > 2 and json.loads("".join(json_parts)) == {"k": "v" * 30}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"
    assert bad_status == 404 and json.loads(bad)["type"] == "error"


def test_error_times_counters_are_per_script_and_per_turn() -> None:
    with FakeAnthropic() as fake:
        fake.script("s", error(500, times=2), text("t0"), error(529, times=1), error(503, times=1), text("t1"))
        body = {"model": MODEL, "max_tokens": 5, "messages": [{"role": "user", "content": "s"}]}
        statuses = [raw_post(fake, "/v1/messages", body)[0] for _ in range(4)]
        body["messages"] += [{"role": "assistant", "content": "t0"}, {"role": "user", "content": "go on"}]
        statuses += [raw_post(fake, "/v1/messages", body)[0] for _ in range(3)]
        last = json.loads(raw_post(fake, "/v1/messages", body)[2])
    assert statuses == [500, 500, 200, 200, 529, 503, 200]
    assert last["content"][0]["text"] == "t1"


# ---------------------------------------------------------------------------------------------
# The real Claude Code CLI against the fake
# ---------------------------------------------------------------------------------------------

def bundled_claude() -> Path:
    sdk = pytest.importorskip("claude_agent_sdk", reason="claude-agent-sdk (which bundles the CLI) is not installed")
    binary = Path(sdk.__file__).parent / "_bundled" / "claude"
    if not binary.is_file():
        pytest.skip(f"no bundled Claude Code CLI at {binary}")
    return binary


def run_claude(fake: FakeAnthropic, tmp_path: Path, prompt: str) -> list[dict]:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    project = tmp_path / "project"
    skill_dir = project / ".claude" / "skills" / "demo-skill"
    skill_dir.mkdir(parents=True, exist_ok=True)
    (skill_dir / "SKILL.md").write_text(
        "---\nname: demo-skill\ndescription: Demonstrates the fake API. Use when asked for a demo.\n---\n"
        "# Demo skill\n\nReply with DEMO-BODY-MARKER.\n", encoding="utf-8")
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "ANTHROPIC_BASE_URL": fake.url,
           "ANTHROPIC_API_KEY": "test-key", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_TELEMETRY": "1"}
    done = subprocess.run([str(bundled_claude()), "-p", prompt, "--output-format", "stream-json", "--verbose",
                           "--max-turns", "3"], env=env, cwd=project, capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, f"claude exited {done.returncode}: {done.stderr[-2000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.strip()]


def tool_uses(events: list[dict]) -> list[dict]:
    return [block for e in events if e["type"] == "assistant"
            for block in e["message"]["content"] if block.get("type") == "tool_use"]


def test_claude_code_cli_activates_a_skill_through_the_fake(tmp_path: Path) -> None:
    bundled_claude()
    with FakeAnthropic() as fake:
        fake.script("please run the demo", skill("demo-skill"), text("final answer"))
        events = run_claude(fake, tmp_path, "please run the demo now")

    assert events[0]["type"] == "system" and events[0]["subtype"] == "init"
    assert "demo-skill" in events[0].get("skills", [])
    assert any(u["name"] == "Skill" and u["input"] == {"skill": "demo-skill"} for u in tool_uses(events))
    results = [block for e in events if e["type"] == "user" and isinstance(e["message"]["content"], list)
               for block in e["message"]["content"] if block.get("type") == "tool_result"]
    assert any("demo-skill" in json.dumps(r.get("content")) for r in results)
    result = events[-1]
    assert result["type"] == "result" and result["subtype"] == "success" and result["is_error"] is False
    assert result["result"] == "final answer"  # (num_turns was 3 here for 2 API calls with CLI 2.1.332)

    calls = fake.requests
    assert len(calls) == 2, [(r.method, r.path, r.query) for r in calls]
    assert {(r.method, r.path, r.query) for r in calls} == {("POST", "/v1/messages", "beta=true")}
    assert all(r.body["stream"] is True for r in calls)
    assert [r.turn for r in calls] == [0, 1] and [r.outcome for r in calls] == ["tool_use", "text"]
    first = calls[0].body
    assert {"model", "max_tokens", "messages", "system", "tools", "stream"} <= set(first)
    skill_tool = next(t for t in first["tools"] if t["name"] == "Skill")
    assert skill_tool["input_schema"]["required"] == ["skill"]
    listing_messages = [m for m in first["messages"] if m["role"] == "system"
                        and "The following skills are available" in json.dumps(m["content"])]
    assert listing_messages, "no system-role skill listing inside messages"
    assert "- demo-skill: Demonstrates the fake API." in json.dumps(listing_messages[0]["content"])
    assert first["messages"][0]["role"] == "user"  # the listing comes after the first user message
    # The second call carries the tool round-trip and the skill body
    second = json.dumps(calls[1].body["messages"])
    assert "Launching skill: demo-skill" in second and "DEMO-BODY-MARKER" in second


def test_claude_code_cli_falls_back_to_a_json_request_after_a_malformed_stream(tmp_path: Path) -> None:
    bundled_claude()
    with FakeAnthropic() as fake:
        fake.script("fallback please", malformed(times=1), text("recovered without streaming"))
        events = run_claude(fake, tmp_path, "fallback please")
    assert events[-1]["type"] == "result" and events[-1]["result"] == "recovered without streaming"
    assert [(r.outcome, r.body["stream"]) for r in fake.requests] == [("malformed", True), ("text", False)]
