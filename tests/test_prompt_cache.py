"""The fake's prompt-cache accounting follows the documented prefix rules, proven with the real `anthropic` SDK.

The rules (https://platform.claude.com/docs/en/build-with-claude/prompt-caching): the prefix is tools, then
system, then messages, up to a `cache_control` breakpoint; a breakpoint also finds what was written at any of the
~20 block boundaries before it (so a conversation whose breakpoint moved on reads what its previous turn wrote);
where a marker sits is no part of the prefix. And one assumption (BENCHMARKS.md): Claude Code's
`x-anthropic-billing-header:` system block, which changes with the prompt, is consumed by the first-party API and
is no part of the cached prefix.
"""

from __future__ import annotations

import json

import pytest

from runner.testing.fake_anthropic import FakeAnthropic, input_tokens_for, text

anthropic = pytest.importorskip("anthropic")

MODEL = "claude-sonnet-4-6"  # a 1,024-token minimum
EPHEMERAL = {"type": "ephemeral"}
BIG = "The same long instructions, sentence after sentence. " * 200  # ~10,600 characters, ~2,650 tokens


def client(fake: FakeAnthropic):
    return anthropic.Anthropic(base_url=fake.url, api_key="test-key", max_retries=0, timeout=10.0)


def usage_of(message) -> tuple[int, int, int]:
    u = message.usage
    return u.input_tokens, u.cache_creation_input_tokens or 0, u.cache_read_input_tokens or 0


def billing(suffix: str) -> dict:
    """The block as the CLI sends it: its version suffix changes with the first user message."""
    return {"type": "text", "text": f"x-anthropic-billing-header: cc_version=2.1.332.{suffix}; cc_entrypoint=sdk-py;"}


def test_the_billing_header_block_is_no_part_of_the_cached_prefix() -> None:
    with FakeAnthropic() as fake:
        fake.default(text("ok"))
        c = client(fake)
        answers = []
        for prompt, suffix in (("first question", "b10"), ("second question", "013")):
            system = [billing(suffix), {"type": "text", "text": BIG, "cache_control": EPHEMERAL}]
            answers.append(c.messages.create(model=MODEL, max_tokens=64, system=system,
                                             messages=[{"role": "user", "content": prompt}]))
        bodies = [r.body for r in fake.message_requests]
    assert bodies[0]["system"][0]["text"] != bodies[1]["system"][0]["text"]
    _, written, read = usage_of(answers[0])
    assert written > 1024 and read == 0
    # The second request differs from the first before its breakpoint only in the billing block: it reads.
    _, written2, read2 = usage_of(answers[1])
    assert written2 == 0 and read2 == written
    for answer, body in zip(answers, bodies):
        assert sum(usage_of(answer)) == input_tokens_for(body)


def test_a_moved_breakpoint_reads_what_the_previous_turn_wrote() -> None:
    """Claude Code marks the last block of every turn: turn 2 reads turn 1's whole prefix, although the marker
    that wrote it is gone from that block."""
    with FakeAnthropic() as fake:
        fake.default(text("an answer"), text("another"))
        c = client(fake)
        first = [{"type": "text", "text": BIG}, {"type": "text", "text": "the question", "cache_control": EPHEMERAL}]
        one = c.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": first}])
        again = [{"type": "text", "text": BIG}, {"type": "text", "text": "the question"}]
        two = c.messages.create(model=MODEL, max_tokens=64, messages=[
            {"role": "user", "content": again}, {"role": "assistant", "content": "an answer"},
            {"role": "user", "content": [{"type": "text", "text": "and then?", "cache_control": EPHEMERAL}]}])
        bodies = [r.body for r in fake.message_requests]
    _, written, _ = usage_of(one)
    plain, written2, read2 = usage_of(two)
    assert written > 1024 and read2 > 0
    # What turn 1 wrote, counted as turn 2 sends it (the same blocks without the marker).
    assert read2 == len(json.dumps([{"role": "user", "content": again}]) + json.dumps("")) // 4
    assert written2 > 0 and plain + written2 + read2 == input_tokens_for(bodies[1])


def test_the_lookback_ends_twenty_blocks_before_the_breakpoint() -> None:
    def request(c, extra_blocks: int, word: str = "part"):
        content = [{"type": "text", "text": BIG}] + [{"type": "text", "text": f"{word} {i}"} for i in range(extra_blocks)]
        content[-1] = {**content[-1], "cache_control": EPHEMERAL}
        return c.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": content}])

    with FakeAnthropic() as fake:
        fake.default(text("ok"))
        c = client(fake)
        request(c, 0)  # writes the prefix ending at the BIG block
        near = request(c, 19)  # BIG is the 20th block counted back from the breakpoint: found
        far = request(c, 20, "other")  # the 21st (and nothing else written matches): not found
    assert usage_of(near)[2] > 1024
    assert usage_of(far)[2] == 0


def test_api_host_sessions_send_one_prefix_and_record_its_hash(tmp_path) -> None:
    """The api host's prefix (tools, system with the listing) is the same for every session of a run without
    excluded skills; its hash is on every observation, and a probe's control arm (a skill left out) has its own."""
    import asyncio

    from runner.core.observation import SessionSpec
    from runner.corpus.loader import load_library
    from runner.corpus.settings import Settings
    from runner.hosts.api import TOOLS, ApiHost, prefix_hash
    from runner.hosts.prices import load as load_prices
    from runner.hosts.workspace import LibraryFiles
    from runner.testing.fake_anthropic import skill
    from tests.helpers import big_library

    library, _ = load_library(big_library(tmp_path / "lib"), Settings())
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)

    def spec(prompt: str, exclude: list[str]) -> SessionSpec:
        return SessionSpec(attempt_id=prompt, uid=prompt, prompt=prompt, model=MODEL, max_turns=4, timeout_s=20,
                           max_output_tokens=256, exclude_skills=exclude)

    with FakeAnthropic() as fake:
        fake.default(skill("skill-03"), text("done"))
        host = ApiHost(library, files, load_prices(Settings()), "sk-test-api-prefix", fake.url, None)

        async def main():
            try:
                return [await host.run(spec(p, x)) for p, x in (("one", []), ("two", []), ("three", ["skill-07"]))]
            finally:
                await host.aclose()
        one, two, three = asyncio.run(main())
        bodies = [r.body for r in fake.message_requests]
    heads = [(b["tools"], b["system"]) for b in bodies]
    assert heads[0] == heads[1] == heads[2] == heads[3] != heads[4]
    assert one.prefix_hash == two.prefix_hash == prefix_hash(MODEL, bodies[0]["system"]) != three.prefix_hash
    assert bodies[0]["tools"] == TOOLS
    # The second session read the prefix in both of its turns; its first turn's input is recorded.
    assert two.usage.cache_read_input_tokens > 0 and two.usage.cache_creation_input_tokens == 0
    assert two.first_turn_input_tokens == input_tokens_for(bodies[2]) and two.model_calls == 2
