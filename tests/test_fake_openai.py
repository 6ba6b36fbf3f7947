"""The fake Responses API's wire format, over real HTTP on 127.0.0.1 (the real Codex CLI against it:
tests/test_host_codex.py)."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from runner.testing.fake_openai import (
    FakeOpenAI,
    Usage,
    break_stream,
    error,
    failed,
    first_user_text,
    function_call,
    hang,
    input_tokens_for,
    items,
    output_tokens_for,
    read_skill,
    stream_error,
    text,
    turn_index_for,
)

MODEL = "gpt-fake"


def user(s: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": s}]}


def developer(s: str) -> dict[str, Any]:
    return {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": s}]}


def body_for(prompt: str, *later: dict[str, Any], stream: bool = True) -> dict[str, Any]:
    """A request shaped as Codex sends one: developer prompt, environment context, the prompt, then later items."""
    return {"model": MODEL, "stream": stream, "store": False, "tool_choice": "auto", "parallel_tool_calls": True,
            "input": [developer("You are a coding agent."), user("<environment_context>cwd</environment_context>"),
                      user(prompt), *later]}


def post(fake: FakeOpenAI, body: dict[str, Any], path: str = "/v1/responses",
         timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(fake.url + path, data=json.dumps(body).encode(), method="POST",
                                     headers={"content-type": "application/json", "authorization": "Bearer k"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


def sse(raw: bytes) -> list[tuple[str, dict[str, Any]]]:
    events = []
    for chunk in raw.decode().split("\n\n"):
        if chunk.strip():
            lines = dict(line.split(": ", 1) for line in chunk.splitlines())
            events.append((lines["event"], json.loads(lines["data"])))
    return events


def completed(events: list[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    [done] = [d["response"] for n, d in events if n == "response.completed"]
    assert isinstance(done, dict)
    return done


def test_a_text_reply_streams_the_apis_event_sequence() -> None:
    reply = "a streamed reply longer than one sixteen-character chunk"
    with FakeOpenAI() as fake:
        fake.script("hello there", text(reply))
        status, headers, raw = post(fake, body_for("hello there"))
    assert status == 200 and headers["Content-Type"].startswith("text/event-stream")
    assert headers["x-request-id"] == "req_fake_000001"
    events = sse(raw)
    names = [n for n, _ in events]
    assert names[:4] == ["response.created", "response.in_progress", "response.output_item.added",
                         "response.content_part.added"]
    assert names[-4:] == ["response.output_text.done", "response.content_part.done", "response.output_item.done",
                          "response.completed"]
    assert all(d["type"] == n for n, d in events)
    assert [d["sequence_number"] for _, d in events] == list(range(len(events)))
    created = events[0][1]["response"]
    assert created["status"] == "in_progress" and created["output"] == [] and created["usage"] is None
    deltas = [d["delta"] for n, d in events if n == "response.output_text.delta"]
    assert len(deltas) > 1 and "".join(deltas) == reply
    done = completed(events)
    assert done["id"] == created["id"] == "resp_fake_000001" and done["status"] == "completed"
    [message] = done["output"]
    assert message == {"id": "msg_fake_000001", "type": "message", "status": "completed", "role": "assistant",
                       "content": [{"type": "output_text", "text": reply, "annotations": []}]}
    assert events[-2][1]["item"] == message


def test_usage_follows_the_documented_formula_or_the_scripted_figures() -> None:
    with FakeOpenAI() as fake:
        fake.script("count me", text("twelve chars"))
        fake.script("fixed", text("x"), usage=Usage(1000, 50, cached_tokens=400, reasoning_tokens=7))
        body = body_for("count me")
        usage = completed(sse(post(fake, body)[2]))["usage"]
        fixed = completed(sse(post(fake, body_for("fixed"))[2]))["usage"]
    assert usage["input_tokens"] == input_tokens_for(body) == len(json.dumps(body["input"]) + '""') // 4
    assert usage["output_tokens"] == output_tokens_for(text("twelve chars")) == 10 + 3
    assert usage["total_tokens"] == usage["input_tokens"] + usage["output_tokens"]
    assert usage["input_tokens_details"] == {"cached_tokens": 0}
    assert usage["output_tokens_details"] == {"reasoning_tokens": 0}
    assert fixed == {"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 400}, "output_tokens": 50,
                     "output_tokens_details": {"reasoning_tokens": 7}, "total_tokens": 1050}


def test_function_calls_stream_their_arguments_and_read_skill_is_a_shell_read() -> None:
    with FakeOpenAI() as fake:
        fake.script("load it", items(read_skill("pdf"), function_call("view_image", {"path": "a.png"})))
        events = sse(post(fake, body_for("load it"))[2])
    added = [d["item"] for n, d in events if n == "response.output_item.added"]
    assert [a["arguments"] for a in added] == ["", ""] and [a["status"] for a in added] == ["in_progress"] * 2
    first = "".join(d["delta"] for n, d in events if n == "response.function_call_arguments.delta"
                    and d["output_index"] == 0)
    assert json.loads(first) == {"cmd": "cat .agents/skills/pdf/SKILL.md"}
    output = completed(events)["output"]
    assert [(o["type"], o["name"], o["call_id"], o["id"]) for o in output] == [
        ("function_call", "exec_command", "call_fake_000001", "fc_fake_000001"),
        ("function_call", "view_image", "call_fake_000002", "fc_fake_000002")]
    assert json.loads(output[1]["arguments"]) == {"path": "a.png"}


def test_a_request_without_stream_gets_the_response_object() -> None:
    with FakeOpenAI() as fake:
        fake.script("plain", text("as json"))
        status, headers, raw = post(fake, body_for("plain", stream=False))
    response = json.loads(raw)
    assert status == 200 and headers["Content-Type"] == "application/json"
    assert response["object"] == "response" and response["output"][0]["content"][0]["text"] == "as json"


def test_turn_index_counts_model_turns_and_the_script_is_chosen_by_the_opening_user_text() -> None:
    call = {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"}
    output = {"type": "function_call_output", "call_id": "c1", "output": "done"}
    reasoning = {"type": "reasoning", "summary": [], "encrypted_content": "x"}
    answer = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "hi"}]}
    parallel = body_for("p", reasoning, call, {**call, "call_id": "c2"}, output, {**output, "call_id": "c2"})
    assert turn_index_for(body_for("p")) == 0
    assert turn_index_for(parallel) == 1  # one response's items and then their results: one turn
    assert turn_index_for(body_for("p", call, output, call, output, answer, user("more"))) == 3
    # The user text after a model turn is not the opening: a script matches what the session began with, without
    # Codex's environment context (its session path would match many a script).
    assert first_user_text(body_for("open", call, output, user("later"))) == "open"
    assert first_user_text(body_for("open", user("<skill>\n<name>pdf</name>"))) == "open\n<skill>\n<name>pdf</name>"
    with FakeOpenAI() as fake:
        fake.script("route me", text("t0"), text("t1"))
        fake.default(text("default"))
        replies = [completed(sse(post(fake, body)[2]))["output"][0]
                   for body in (body_for("please route me"), body_for("please route me", call, output),
                                body_for("please route me", call, output, call, output),
                                body_for("something else"))]
        recorded = fake.requests_for("route me")
    assert [r["content"][0]["text"] for r in replies] == ["t0", "t1", "done", "default"]
    assert [(r.script, r.turn, r.outcome) for r in recorded] == [("route me", 0, "text"), ("route me", 1, "text"),
                                                                 ("route me", 2, "text")]
    assert recorded[0].headers["authorization"] == "Bearer k" and recorded[0].body["model"] == MODEL


def test_errors_carry_the_apis_error_json_and_times_counts_per_turn() -> None:
    with FakeOpenAI() as fake:
        fake.script("flaky turns", error(500, times=2), text("t0"), error(429, times=1), error(503, times=1), text("t1"))
        fake.script("always bad", error(400, code="invalid_value", message="bad thing"))
        statuses, bodies = [], []
        for body in [body_for("flaky turns")] * 3 + [body_for("flaky turns", {"type": "function_call", "call_id": "c", "name": "n",
                                                          "arguments": "{}"})] * 3:
            status, _, raw = post(fake, body)
            statuses.append(status)
            bodies.append(raw)
        always = [post(fake, body_for("always bad"))[0] for _ in range(2)]
        _, _, bad_raw = post(fake, body_for("always bad"))
    assert statuses == [500, 500, 200, 429, 503, 200]
    assert json.loads(bodies[0]) == {"error": {"message": "The server had an error while processing your request "
                                                          "(fake).", "type": "server_error", "param": None,
                                               "code": None}}
    assert json.loads(bodies[3])["error"]["code"] == "rate_limit_exceeded"
    assert always == [400, 400]
    assert json.loads(bad_raw)["error"] == {"message": "bad thing", "type": "invalid_request_error", "param": None,
                                            "code": "invalid_value"}
    assert [r.outcome for r in fake.requests_for("flaky turns")][:3] == ["error 500", "error 500", "text"]


def test_a_cut_stream_ends_without_its_terminating_chunk() -> None:
    with FakeOpenAI() as fake:
        fake.script("cut", break_stream(times=1), text("second try"))
        with pytest.raises(http.client.IncompleteRead) as info:
            post(fake, body_for("cut"))
        again = completed(sse(post(fake, body_for("cut"))[2]))
    events = sse(info.value.partial)
    assert [n for n, _ in events] == ["response.created", "response.in_progress", "response.output_item.added",
                                      "response.output_text.delta"]
    assert again["output"][0]["content"][0]["text"] == "second try"
    assert [r.outcome for r in fake.requests] == ["break_stream", "text"]


def test_response_failed_and_the_error_event_end_a_stream_without_response_completed() -> None:
    with FakeOpenAI() as fake:
        fake.script("fail", failed("context_length_exceeded", "too long"))
        fake.script("mid", stream_error("server_error", "boom"))
        failed_events = sse(post(fake, body_for("fail"))[2])
        error_events = sse(post(fake, body_for("mid"))[2])
    assert [n for n, _ in failed_events] == ["response.created", "response.in_progress", "response.failed"]
    response = failed_events[-1][1]["response"]
    assert response["status"] == "failed" and response["error"] == {"code": "context_length_exceeded",
                                                                    "message": "too long"}
    assert [n for n, _ in error_events][-1] == "error"
    assert {k: error_events[-1][1][k] for k in ("code", "message", "param")} == {"code": "server_error",
                                                                                 "message": "boom", "param": None}


def test_hang_answers_late_or_is_cut_when_the_fake_closes() -> None:
    fake = FakeOpenAI().start()
    try:
        fake.script("short", hang(0.2))
        fake.script("slow", hang(30))
        began = time.monotonic()
        late = completed(sse(post(fake, body_for("short"))[2]))
        assert time.monotonic() - began >= 0.2 and late["output"][0]["content"][0]["text"] == "late"
        with pytest.raises((TimeoutError, socket.timeout, urllib.error.URLError)):
            post(fake, body_for("slow"), timeout=0.3)
        pool = ThreadPoolExecutor(1)
        waiting = pool.submit(post, fake, body_for("slow again"), "/v1/responses", 120.0)
        for _ in range(600):  # a bound against a hang, not a measurement
            if len(fake.requests_for("slow")) == 2:
                break
            time.sleep(0.05)
    finally:
        fake.close()
    # Closing cut the 30 s hang: the waiting request fails instead of getting its late answer.
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
        waiting.result(timeout=120)
    pool.shutdown()
    assert [r.outcome for r in fake.requests_for("slow")] == ["hang", "hang"]


def test_other_paths_are_404_with_the_error_json() -> None:
    with FakeOpenAI() as fake:
        status, _, raw = post(fake, {}, path="/v1/models")
        bad_status, _, _ = post(fake, [], path="/v1/responses")  # type: ignore[arg-type]
    assert status == 404 and json.loads(raw)["error"]["type"] == "invalid_request_error"
    assert bad_status == 400
    assert [r.path for r in fake.requests] == ["/v1/models", "/v1/responses"] and not fake.response_requests
