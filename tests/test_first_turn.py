"""The first-turn host (issue 21 §2): Claude Code's own first request, sent directly with the anthropic SDK.

Everything real but the Messages API: the CLI bundled in claude-agent-sdk makes the capture and the hand-off
sessions, the anthropic SDK sends the first turns, runner.testing.fake_anthropic answers both on 127.0.0.1 and logs
what each sent. The library and the keyword model are runner.testing.trigger_set's (skill-creator's layout).
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
from pathlib import Path
from typing import Any

from runner.core.observation import Observation, SessionSpec
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.claude_code import bundled_cli, cli_version
from runner.hosts.first_turn import CAPTURE_FILE, SENTINEL, FirstTurnHost, breakpoints, ineligible
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs, make_host
from runner.testing import trigger_set
from runner.testing.fake_anthropic import FakeAnthropic, Recorded, break_stream, dynamic, error, text, tool
from tests.billed import billed_usd
from tests.conftest import fake_env, run_cli

KEY = "sk-test-first-turn-21"
MODEL = "claude-sonnet-4-6"
BUDGET = 0.75  # a session's reservation: the CLI shows it to the model, so the capture is made with it
UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
DEVICE = re.compile(r"^[0-9a-f]{64}$")

# Where the first-turn host's request may differ from the CLI's own for the same prompt, each with its reason
# (docs/hosts.md lists them too). Nothing else may.
BODY_DIFFERENCES = {
    "metadata.user_id": "a JSON string of device_id and session_id: the CLI makes both per session (each session "
                        "has its own config folder); the host makes a fresh pair of the same shape",
}
HEADER_DIFFERENCES = {
    "x-claude-code-session-id": "the CLI's session id (the one in metadata.user_id), new per session",
    "user-agent": "the client: claude-cli/<version> there, the anthropic Python SDK here",
    "x-stainless-*": "the client's SDK, its language, runtime and timeouts",
    "x-api-key": "the run's key: the CLI sends it as x-api-key, the Python SDK as authorization: Bearer",
    "authorization": "the same key, as the Python SDK sends it",
    "accept-encoding": "the HTTP client's own decoders",
    "content-length": "the body's size: the Python SDK writes the same JSON object with its own key order",
}
# A hand-off: the first reply calls Read on a file that is no skill's SKILL.md.
HANDED_OFF = trigger_set.SHOULD_NOT[0]
FAILING = trigger_set.SHOULD_NOT[1]  # every request answered with HTTP 500
CUT = trigger_set.SHOULD_NOT[2]  # every stream cut after message_start and half a text block


def listed_header(name: str) -> bool:
    return name in HEADER_DIFFERENCES or (name.startswith("x-stainless-") and "x-stainless-*" in HEADER_DIFFERENCES)


def host_for(library_root: Path, fake: FakeAnthropic, run_folder: Path | None = None) -> FirstTurnHost:
    settings = Settings()
    library, _ = load_library(library_root, settings)
    host = make_host("first-turn", HostInputs(library=library, settings=settings, prices=load_prices(settings),
                                              api_key=KEY, base_url=fake.url, run_folder=run_folder))
    assert isinstance(host, FirstTurnHost)
    return host


def spec(prompt: str, attempt: str, decide_when: list[list[str]] | None = None) -> SessionSpec:
    return SessionSpec(attempt_id=attempt, uid=attempt, prompt=prompt, model=MODEL, max_turns=4, timeout_s=60,
                       max_usd=BUDGET, decide_when=[[trigger_set.SKILL]] if decide_when is None else decide_when)


def first_requests(fake: FakeAnthropic, prompt: str) -> list[Recorded]:
    return [r for r in fake.requests_for(prompt) if r.turn == 0]


def by_python_sdk(request: Recorded) -> bool:
    return request.headers.get("user-agent", "").startswith("AsyncAnthropic/Python")


def user_id(body: dict[str, Any]) -> dict[str, str]:
    return json.loads(body["metadata"]["user_id"])


BILLING_SUFFIX = re.compile(r"(cc_version=[^;\s]+)\.[0-9a-f]{3};")


def comparable_body(body: dict[str, Any]) -> dict[str, Any]:
    """The body without the listed fields (their shape is checked apart): the session ids, and the billing block's
    3-hex suffix, which the CLI derives from each prompt and the host sends as captured."""
    out = copy.deepcopy(body)
    out["metadata"]["user_id"] = "<per session>"
    for block in out.get("system", []):
        if isinstance(block, dict) and isinstance(block.get("text"), str):
            block["text"] = BILLING_SUFFIX.sub(r"\1.<per prompt>;", block["text"], count=1)
    return out


def without_added_marker(body: dict[str, Any]) -> dict[str, Any]:
    """The first-turn request without the one cache breakpoint the host adds, on the block before the prompt."""
    out = copy.deepcopy(body)
    i, j = next((i, j) for i, m in enumerate(out["messages"]) for j, b in enumerate(m["content"])
                if isinstance(b, dict) and b.get("type") == "text" and "cache_control" in b
                and j + 1 < len(m["content"]))
    del out["messages"][i]["content"][j]["cache_control"]
    return out


def comparable_headers(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if not listed_header(name)}


def test_the_first_turn_request_is_the_clis_own_but_for_the_listed_fields(tmp_path: Path) -> None:
    """For the same prompts, the real CLI's first request and the first-turn host's are equal, body and headers,
    apart from the listed fields; the capture is saved and every attempt carries its hash."""
    library_root = trigger_set.write_library(tmp_path / "library")
    run_folder = tmp_path / "run"
    run_folder.mkdir()
    # An ASCII prompt, and one with an emoji (a surrogate pair in UTF-16, as the CLI's strings are).
    prompts = [trigger_set.SHOULD[0], "Prüfe 🧾 die invoice von Northwind, bitte"]
    with FakeAnthropic() as fake:
        trigger_set.script(fake)
        fake.script(prompts[1], *(dynamic(trigger_set.reply),) * 3)  # the keyword model for this prompt too
        host = host_for(library_root, fake, run_folder)

        async def sessions() -> tuple[list[Observation], list[Observation], Observation]:
            try:
                cli = [await host.real.run(spec(p, f"cli-{i}")) for i, p in enumerate(prompts)]
                first = [await host.run(spec(p, f"first-{i}")) for i, p in enumerate(prompts)]
                other = await host.run(spec(trigger_set.SHOULD[1], "open", decide_when=[]))
                return cli, first, other
            finally:
                await host.aclose()

        cli, first, not_eligible = asyncio.run(sessions())
        pairs = [first_requests(fake, p) for p in prompts]

    for prompt, requests in zip(prompts, pairs):
        assert [by_python_sdk(r) for r in requests] == [False, True], prompt  # the CLI's, then the host's
        theirs, ours = requests
        assert (theirs.method, theirs.path, theirs.query) == (ours.method, ours.path, ours.query) == \
            ("POST", "/v1/messages", "beta=true")
        assert comparable_body(without_added_marker(ours.body)) == comparable_body(theirs.body), prompt
        assert breakpoints(ours.body) == breakpoints(theirs.body) + 1 <= 4  # the one marker the host adds
        assert comparable_headers(ours.headers) == comparable_headers(theirs.headers), prompt
        # The listed fields: the same shape, this session's own values, the header naming the body's session.
        mine, cli_ids = user_id(ours.body), user_id(theirs.body)
        assert list(mine) == list(cli_ids) and mine["account_uuid"] == cli_ids["account_uuid"]
        assert UUID.match(mine["session_id"]) and DEVICE.match(mine["device_id"])
        assert mine["session_id"] != cli_ids["session_id"] and mine["device_id"] != cli_ids["device_id"]
        assert ours.headers["x-claude-code-session-id"] == mine["session_id"]
        assert theirs.headers["x-claude-code-session-id"] == cli_ids["session_id"]
        assert ours.headers["authorization"] == f"Bearer {KEY}" and theirs.headers["x-api-key"] == KEY
        assert set(theirs.headers) - set(ours.headers) <= {"x-api-key"}
        assert {n for n in set(ours.headers) - set(theirs.headers) if not n.startswith("x-stainless-")} \
            <= {"authorization"}

    assert [o.first_turn.outcome if o.first_turn else None for o in first] == ["decided", "decided"]
    assert all(o.host == "first-turn" and o.model_calls == 1 and o.error_kind is None for o in first)
    # The Skill call decided the trigger attempt (the keyword model calls it for a query naming an invoice).
    assert [o.decided.event if o.decided else None for o in first] == ["first reply: Skill(invoice-scanner)"] * 2
    assert all(o.final_answer is None and o.fired() == [trigger_set.SKILL] for o in first)
    assert [o.decided.event if o.decided else None for o in cli] == ["PostToolUse Skill(invoice-scanner), turn 0"] * 2

    saved = json.loads((run_folder / CAPTURE_FILE).read_text(encoding="utf-8"))
    assert saved["cli_version"] == cli_version(bundled_cli()) and "x-api-key" not in saved["headers"]
    assert SENTINEL in json.dumps(saved["body"]["messages"]) and saved["max_usd"] == BUDGET
    assert {o.prefix_hash for o in first} == {o.first_turn.capture_hash for o in first if o.first_turn} == \
        {saved["hash"]}

    # Not activation-only: a Claude Code session from the start, under this host's name.
    assert not_eligible.host == "first-turn" and not_eligible.first_turn is not None
    assert not_eligible.first_turn.outcome == "not-eligible"
    assert not_eligible.first_turn.reason.startswith("not activation-only")
    assert not_eligible.model_calls == 2 and not_eligible.fired() == [trigger_set.SKILL]


def test_prompts_the_cli_does_not_send_as_written_run_on_claude_code() -> None:
    """Measured on CLI 2.1.332: these prompts change the CLI's first request beyond the prompt block."""
    cases = {
        "/invoice-scanner read it": "a slash command",
        "summarise @notes.md": "an @ mention",
        "UltraThink: is this invoice right?": "the keyword ultrathink",
        "   ": "an empty prompt",
    }
    for prompt, reason in cases.items():
        found = ineligible(spec(prompt, "x"))
        assert found is not None and found.startswith(reason), prompt
    assert ineligible(spec("mail a@b.com the invoice", "x")) is None  # no mention: the CLI sends it as written
    assert ineligible(spec("the invoice", "x")) is None
    assert ineligible(spec("the invoice", "x").model_copy(update={"exclude_skills": ["x"]})) is not None
    assert ineligible(spec("the invoice", "x").model_copy(update={"case_files": ["a.pdf"]})) is not None


def attempts_of(out: Path) -> dict[str, dict[str, Any]]:
    records = [json.loads(line) for line in (out / "attempts.jsonl").read_text(encoding="utf-8").splitlines()]
    return {r["uid"]: r for r in records if r["status"] == "finished"}


def test_skill_evals_run_on_the_first_turn_host(tmp_path: Path) -> None:
    """`skill-evals run --host first-turn` on the trigger set: one request per decided attempt, a hand-off runs on
    Claude Code and is counted, a 500 is ERROR, later first turns read the shared prefix from the cache, and a run
    folder captured with another CLI version is refused."""
    library_root = trigger_set.write_library(tmp_path / "library")
    out = tmp_path / "run"
    queries = {f"{trigger_set.SKILL}/trigger/q{i + 1}": q
               for i, q in enumerate((*trigger_set.SHOULD, *trigger_set.SHOULD_NOT))}
    with FakeAnthropic() as fake:
        fake.script(HANDED_OFF, tool("Read", {"file_path": "README.md"}), text("Waves fold into foam."))
        fake.script(FAILING, error(500, "api_error", "fake outage"))
        fake.script(CUT, break_stream())
        trigger_set.script(fake)
        done = run_cli("run", "--library", str(library_root), "--out", str(out), "--host", "first-turn",
                       "--repeats", "1", "--concurrency", "1", "--timeout", "60", env=fake_env(fake, KEY))
        assert done.returncode == 0, done.stdout + done.stderr  # results never fail the command (docs/cli.md)
        sent = {uid: fake.requests_for(query) for uid, query in queries.items()}
        cut_billed = billed_usd(fake, match=CUT)
    records = attempts_of(out)
    assert len(records) == 20 and all(r["prefix_hash"] for r in records.values())
    assert {r["first_turn"]["cli_version"] for r in records.values() if r["first_turn"]} == {cli_version(bundled_cli())}
    uid_of = {query: uid for uid, query in queries.items()}
    handed_uid, failing_uid, cut_uid = uid_of[HANDED_OFF], uid_of[FAILING], uid_of[CUT]
    states = {uid: r["outcome"]["state"] for uid, r in records.items()}
    assert {uid: s for uid, s in states.items() if s != "PASS"} == {failing_uid: "ERROR", cut_uid: "ERROR"}

    decided = [uid for uid in queries if uid not in (handed_uid, failing_uid, cut_uid)]
    for uid in decided:  # trigger queries (a Skill call) and should-not queries (a text answer) alike
        record = records[uid]
        assert [by_python_sdk(r) for r in sent[uid]] == [True], uid  # exactly one request, the first turn
        assert record["first_turn"]["outcome"] == "decided" and record["model_calls"] == 1
    assert records[decided[0]]["decided"]["event"] == "first reply: Skill(invoice-scanner)"
    assert records[decided[-1]]["decided"] is None and records[decided[-1]]["final_answer"] == "Here you go."

    # The hand-off: the first turn, then a real Claude Code session from scratch (its Read, then its answer).
    hand_off = records[handed_uid]
    assert [by_python_sdk(r) for r in sent[handed_uid]] == [True, False, False]
    assert hand_off["first_turn"]["outcome"] == "handed-off"
    assert hand_off["first_turn"]["reason"] == "the first reply called Read(README.md)"
    assert hand_off["model_calls"] == 3 and hand_off["outcome"]["state"] == "PASS"
    first_usage = hand_off["first_turn"]["usage"]
    assert all(hand_off["usage"][k] >= first_usage[k] for k in first_usage)
    assert hand_off["usage"]["output_tokens"] > first_usage["output_tokens"]  # the session's replies are in it

    # The 500: ERROR with the API's status, never a verdict, and no Claude Code session after it.
    failed = records[failing_uid]
    assert failed["error_kind"] == "api-error" and "HTTP 500" in failed["error_message"]
    assert failed["model_calls"] == 0 and failed["cost_usd"] == 0
    assert failed["first_turn"] is None  # the first reply decided nothing: no first-turn outcome is claimed
    assert all(by_python_sdk(r) for r in sent[failing_uid])  # the SDK's own retries, nothing else
    # A stream cut short is ERROR too, and what its message_start reported is spent and counted.
    cut = records[cut_uid]
    assert cut["error_kind"] == "api-error" and "broke off" in cut["error_message"]
    assert cut["usage"]["cache_read_input_tokens"] + cut["usage"]["cache_creation_input_tokens"] > 0
    assert cut["cost_usd"] > 0 and [by_python_sdk(r) for r in sent[cut_uid]] == [True] and cut["first_turn"] is None
    # What the API billed for the cut reply (its input and the whole reply) is covered: message_start's input plus
    # max_tokens of output, a bound, said so (issue 28).
    assert cut["cost_usd"] >= cut_billed > 0 and cut["cost_basis"] == "bound" and cut["lost_replies"] == 1

    # The cache: the first attempt writes, every later first turn reads the tools, the system blocks and the first
    # message's blocks before the prompt (environment, listing, date: the breakpoint the host adds before the
    # prompt); only the prompt itself is new.
    order = sorted(decided, key=lambda uid: sent[uid][0].time)
    reads = []
    for uid in order[1:]:
        used = records[uid]["first_turn"]["usage"]
        body = sent[uid][0].body
        system_tokens = len(json.dumps([]) + json.dumps(body["system"])) // 4  # as the fake counts that prefix
        assert used["cache_read_input_tokens"] > system_tokens > 0, uid
        reads.append((used["cache_read_input_tokens"],
                      used["input_tokens"] + used["cache_read_input_tokens"] + used["cache_creation_input_tokens"]))
    share = sum(r for r, _ in reads) / sum(t for _, t in reads)
    assert share >= 0.9, share

    # A run folder whose capture is another CLI version's is refused, in one line, before anything runs.
    capture_file = out / CAPTURE_FILE
    saved = json.loads(capture_file.read_text(encoding="utf-8"))
    installed = saved["cli_version"]
    capture_file.write_text(json.dumps({**saved, "cli_version": "2.0.1"}), encoding="utf-8")
    refused = run_cli("run", "--library", str(library_root), "--resume", str(out), env=fake_env(None, KEY))
    assert refused.returncode == 2, refused.stdout + refused.stderr
    message = [line for line in refused.stderr.splitlines() if line.strip()]
    assert len(message) == 1 and "made with Claude Code 2.0.1" in message[0] and \
        f"Claude Code {installed} is installed" in message[0] and "start a new run" in message[0]
