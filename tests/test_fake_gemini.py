"""The fake Gemini API's wire format, read back over HTTP the way a client reads it (fast; no CLI).

The real Gemini CLI against this fake is exercised end to end in tests/test_host_gemini.py."""

from __future__ import annotations

import http.client
import json
import time
import urllib.error
import urllib.request
from typing import Any

import pytest

from runner.testing.fake_gemini import (
    FakeGemini,
    Usage,
    break_stream,
    candidates_tokens_for,
    error,
    function_call,
    hang,
    parts,
    prompt_tokens_for,
    skill,
    text,
)

MODEL = "gemini-2.5-flash"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent?alt=sse"
PLAIN_PATH = f"/v1beta/models/{MODEL}:generateContent"


def body_for(prompt: str, history: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A request shaped like Gemini CLI's: a session-context part, then the prompt, then the history."""
    first = {"role": "user", "parts": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"},
                                       {"text": prompt}]}
    return {"contents": [first, *(history or [])],
            "systemInstruction": {"role": "user", "parts": [{"text": "You are a fake-tested agent."}]},
            "tools": [{"functionDeclarations": [{"name": "activate_skill", "description": "d",
                                                 "parametersJsonSchema": {"type": "object"}}]}],
            "generationConfig": {"temperature": 1}}


def post(fake: FakeGemini, path: str, body: Any, timeout: float = 5.0) -> tuple[int, dict[str, str], bytes]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(fake.url + path, data=data, method="POST",
                                     headers={"content-type": "application/json", "x-goog-api-key": "test-key"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, {k.lower(): v for k, v in response.headers.items()}, response.read()
    except urllib.error.HTTPError as e:
        return e.code, {k.lower(): v for k, v in e.headers.items()}, e.read()


def sse_events(raw: bytes) -> list[dict[str, Any]]:
    """The `data:` events of an SSE body, split on the blank line (CRLF CRLF, as the API sends them)."""
    events = []
    for frame in raw.decode().split("\r\n\r\n"):
        if frame.strip():
            assert frame.startswith("data: "), frame
            events.append(json.loads(frame[len("data: "):]))
    return events


def joined(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The parts of a streamed reply, text pieces joined back into one part (as the SDK's consumers do)."""
    out: list[dict[str, Any]] = []
    for event in events:
        for part in event["candidates"][0]["content"]["parts"]:
            if "text" in part and out and "text" in out[-1]:
                out[-1] = {"text": out[-1]["text"] + part["text"]}
            else:
                out.append(dict(part))
    return out


def test_streamed_text_reply_is_sse_with_usage_on_every_event() -> None:
    with FakeGemini() as fake:
        fake.script("say hello", text("Hello from the fake Gemini API, at some length."))
        body = body_for("please say hello")
        status, headers, raw = post(fake, STREAM_PATH, body)
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert headers.get("transfer-encoding") == "chunked"
    events = sse_events(raw)
    assert len(events) > 1  # a text part is streamed in pieces
    assert joined(events) == [{"text": "Hello from the fake Gemini API, at some length."}]
    assert [e["candidates"][0].get("finishReason") for e in events] == [None] * (len(events) - 1) + ["STOP"]
    prompt = prompt_tokens_for(body)
    output = candidates_tokens_for(text("Hello from the fake Gemini API, at some length."))
    assert all(e["usageMetadata"]["promptTokenCount"] == prompt for e in events)
    assert events[-1]["usageMetadata"] == {"promptTokenCount": prompt, "candidatesTokenCount": output,
                                           "totalTokenCount": prompt + output,
                                           "promptTokensDetails": [{"modality": "TEXT", "tokenCount": prompt}]}
    assert {e["modelVersion"] for e in events} == {MODEL}
    assert len({e["responseId"] for e in events}) == 1


def test_function_call_is_one_whole_part_and_turns_follow_model_contents() -> None:
    with FakeGemini() as fake:
        fake.script("invoices", skill("demo-skill"), text("the summary"))
        first = sse_events(post(fake, STREAM_PATH, body_for("summarise invoices"))[2])
        assert joined(first) == [{"functionCall": {"name": "activate_skill", "args": {"name": "demo-skill"}}}]
        assert len(first) == 1 and first[0]["candidates"][0]["finishReason"] == "STOP"
        history = [{"role": "model", "parts": [{"functionCall": {"name": "activate_skill",
                                                                 "args": {"name": "demo-skill"}}}]},
                   {"role": "user", "parts": [{"functionResponse": {"name": "activate_skill",
                                                                    "response": {"output": "body"}}}]}]
        second = sse_events(post(fake, STREAM_PATH, body_for("summarise invoices", history))[2])
        third = sse_events(post(fake, STREAM_PATH, body_for("summarise invoices", history * 2))[2])
        recorded = fake.requests_for("summarise invoices")
    assert joined(second) == [{"text": "the summary"}]
    assert joined(third) == [{"text": "done"}]  # past the end of the script
    assert [(r.turn, r.outcome, r.script) for r in recorded] == [
        (0, "function_call", "invoices"), (1, "text", "invoices"), (2, "text", "invoices")]
    assert recorded[0].model == MODEL and recorded[0].method_name == "streamGenerateContent"
    assert recorded[0].query == "alt=sse" and recorded[0].headers["x-goog-api-key"] == "test-key"
    assert recorded[0].body["contents"][0]["parts"][1]["text"] == "summarise invoices"


def test_generate_content_answers_one_json_reply_with_several_parts() -> None:
    with FakeGemini() as fake:
        fake.script("two parts", parts("Let me look.", function_call("read_file", {"file_path": "a.md"})))
        body = body_for("two parts please")
        status, headers, raw = post(fake, PLAIN_PATH, body)
    reply = json.loads(raw)
    assert status == 200 and headers["content-type"].startswith("application/json")
    assert reply["candidates"][0]["content"] == {"role": "model", "parts": [
        {"text": "Let me look."}, {"functionCall": {"name": "read_file", "args": {"file_path": "a.md"}}}]}
    expected_out = 10 + len("Let me look." + json.dumps({"file_path": "a.md"})) // 4
    assert reply["usageMetadata"]["candidatesTokenCount"] == expected_out
    assert reply["usageMetadata"]["totalTokenCount"] == prompt_tokens_for(body) + expected_out


def test_fixed_usage_and_the_default_script() -> None:
    with FakeGemini() as fake:
        fake.script("fixed", text("x"), usage=Usage(1234, 56))
        fixed = json.loads(post(fake, PLAIN_PATH, body_for("fixed usage"))[2])
        fake.script("thinking", text("y"), usage=Usage(100, 20, thoughts_tokens=7))
        thinking = json.loads(post(fake, PLAIN_PATH, body_for("thinking hard"))[2])
        fake.default(text("the default reply"))
        other = json.loads(post(fake, PLAIN_PATH, body_for("anything else"))[2])
        recorded = fake.model_requests
    assert fixed["usageMetadata"]["promptTokenCount"] == 1234
    assert fixed["usageMetadata"]["candidatesTokenCount"] == 56
    assert fixed["usageMetadata"]["totalTokenCount"] == 1290
    assert "thoughtsTokenCount" not in fixed["usageMetadata"]
    assert thinking["usageMetadata"]["thoughtsTokenCount"] == 7
    assert thinking["usageMetadata"]["totalTokenCount"] == 127
    assert other["candidates"][0]["content"]["parts"] == [{"text": "the default reply"}]
    assert [r.script for r in recorded] == ["fixed", "thinking", None]


@pytest.mark.parametrize(("status", "name"), [(500, "INTERNAL"), (503, "UNAVAILABLE"), (429, "RESOURCE_EXHAUSTED"),
                                              (400, "INVALID_ARGUMENT")])
def test_error_has_the_api_shape_and_times_then_the_next_item(status: int, name: str) -> None:
    with FakeGemini() as fake:
        fake.script("flaky", error(status, times=2), text("recovered"))
        answers = [post(fake, STREAM_PATH, body_for("flaky call")) for _ in range(3)]
        outcomes = [r.outcome for r in fake.requests_for("flaky call")]
    for code, headers, raw in answers[:2]:
        assert code == status and headers["content-type"].startswith("application/json")
        payload = json.loads(raw)
        assert set(payload) == {"error"} and payload["error"]["code"] == status
        assert payload["error"]["status"] == name and payload["error"]["message"]
    assert answers[2][0] == 200 and joined(sse_events(answers[2][2])) == [{"text": "recovered"}]
    assert outcomes == [f"error {status}", f"error {status}", "text"]


def test_error_without_times_is_every_request_and_retry_delay_is_a_detail() -> None:
    with FakeGemini() as fake:
        fake.script("limited", error(429, "quota gone", retry_delay="3s"))
        answers = [post(fake, PLAIN_PATH, body_for("limited call")) for _ in range(3)]
    assert [a[0] for a in answers] == [429, 429, 429]
    assert json.loads(answers[0][2]) == {"error": {
        "code": 429, "message": "quota gone", "status": "RESOURCE_EXHAUSTED",
        "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "3s"}]}}


def raw_stream(fake: FakeGemini, path: str, body: dict[str, Any]) -> tuple[int, bytes, Exception | None]:
    """Read a streamed answer with http.client, keeping what arrived before a protocol error."""
    host, port = fake.url.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=5)
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    response = conn.getresponse()
    received = b""
    try:
        while True:
            piece = response.read1(65536)
            if not piece:
                return response.status, received, None
            received += piece
    except http.client.IncompleteRead as e:
        return response.status, received + e.partial, e
    except (ConnectionError, http.client.HTTPException) as e:
        return response.status, received, e
    finally:
        conn.close()


def test_break_stream_cuts_after_a_partial_event_then_recovers() -> None:
    with FakeGemini() as fake:
        fake.script("cut me", break_stream(times=1), text("whole answer"))
        status, received, failure = raw_stream(fake, STREAM_PATH, body_for("cut me please"))
        again = post(fake, STREAM_PATH, body_for("cut me please"))
    assert status == 200 and failure is not None  # the chunked body never ended
    assert joined(sse_events(received)) == [{"text": "Partial ans"}]
    assert joined(sse_events(again[2])) == [{"text": "whole answer"}]


def test_break_stream_without_stream_drops_the_connection() -> None:
    with FakeGemini() as fake:
        fake.script("cut plain", break_stream())
        with pytest.raises((urllib.error.URLError, http.client.RemoteDisconnected, ConnectionError)):
            post(fake, PLAIN_PATH, body_for("cut plain"))


def test_hang_delays_the_answer_and_a_client_timeout_comes_first() -> None:
    with FakeGemini() as fake:
        fake.script("slow", hang(0.6, times=1), text("fast now"))
        started = time.monotonic()
        late = json.loads(post(fake, PLAIN_PATH, body_for("slow one"))[2])
        waited = time.monotonic() - started
        fake.script("stuck", hang(30))
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            post(fake, PLAIN_PATH, body_for("stuck one"), timeout=0.3)
        fast = json.loads(post(fake, PLAIN_PATH, body_for("slow one"))[2])
    assert waited >= 0.6
    assert late["candidates"][0]["content"]["parts"] == [{"text": "late"}]
    assert fast["candidates"][0]["content"]["parts"] == [{"text": "fast now"}]


def test_count_tokens_models_and_unknown_routes() -> None:
    with FakeGemini() as fake:
        body = body_for("count me")
        counted = post(fake, f"/v1beta/models/{MODEL}:countTokens", body)
        with urllib.request.urlopen(fake.url + "/v1beta/models", timeout=5) as response:
            models = json.loads(response.read())
        missing = post(fake, "/v1/chat/completions", {"messages": []})
        broken = post(fake, PLAIN_PATH, b"{not json")
        outcomes = [r.outcome for r in fake.requests]
    assert counted[0] == 200 and json.loads(counted[2]) == {"totalTokens": prompt_tokens_for(body)}
    assert models == {"models": []}
    assert missing[0] == 404 and json.loads(missing[2])["error"]["status"] == "NOT_FOUND"
    assert broken[0] == 400 and json.loads(broken[2])["error"]["status"] == "INVALID_ARGUMENT"
    assert outcomes == ["count_tokens", "models", "error 404", "error 400"]
