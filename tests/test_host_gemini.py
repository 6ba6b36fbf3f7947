"""The gemini host end to end: the real Gemini CLI (npm, the pinned version) run by the host's `run(spec)` against the
fake Gemini API on 127.0.0.1 (runner.testing.fake_gemini), on the example library. No key, no internet.

The reader's parsing on recorded lines is tests/test_gemini_reader.py (fast)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from runner.core.observation import Observation, SessionSpec
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Price, RunSettings, Settings
from runner.hosts.agent_cli import AgentCliHost
from runner.hosts.gemini import GeminiCli
from runner.hosts.prices import PriceTable
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs, make_host
from runner.hosts.workspace import LibraryFiles
from runner.testing.fake_gemini import (
    FakeGemini,
    Recorded,
    Usage,
    break_stream,
    candidates_tokens_for,
    error,
    function_call,
    hang,
    prompt_tokens_for,
    skill,
    text,
)
from tests.agent_clis import require_cli
from tests.conftest import EXAMPLE

MODEL = "gemini-2.5-flash"
KEY = "gemini-test-key-not-real-0123"
PRICE = Price(input=0.3, output=2.5, cache_read=0.03)


@pytest.fixture(scope="module")
def program() -> Path:
    return require_cli("gemini")


@pytest.fixture(scope="module")
def library() -> Library:
    lib, _ = load_library(EXAMPLE, Settings())
    return lib


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return load_prices(Settings(prices={MODEL: PRICE}))


def host_for(program: Path, library: Library, prices: PriceTable, fake: FakeGemini, parent: Path,
             max_attempts: int = 1) -> AgentCliHost:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    return AgentCliHost(GeminiCli(program, max_attempts=max_attempts), files, prices, KEY, fake.url,
                        work_parent=parent, aliases=library.aliases())


def spec_for(prompt: str, timeout_s: float = 30.0, max_turns: int = 5, exclude: list[str] | None = None
             ) -> SessionSpec:
    return SessionSpec(attempt_id=f"gemini-{abs(hash(prompt))}", uid="example/test/1", prompt=prompt, model=MODEL,
                       max_turns=max_turns, timeout_s=timeout_s, max_usd=0.25, exclude_skills=exclude or [])


def run(host: AgentCliHost, spec: SessionSpec) -> Observation:
    try:
        return asyncio.run(host.run(spec))
    finally:
        host.close()


def no_key_anywhere(obs: Observation) -> None:
    assert KEY not in obs.model_dump_json()


def chat_requests(fake: FakeGemini, match: str) -> list[Recorded]:
    found = fake.requests_for(match)
    assert all(r.path == f"/v1beta/models/{MODEL}:streamGenerateContent" and r.query == "alt=sse" for r in found)
    return found


def test_a_skill_that_fires_is_a_tool_event_with_the_clis_own_usage(program, library, prices, tmp_path) -> None:
    prompt = "Please review the lodash 4.18 bump before merge"
    with FakeGemini() as fake:
        fake.script("lodash 4.18 bump", skill("dependency-upgrade-reviewer"), text("Hold: 2 breaking changes."))
        obs = run(host_for(program, library, prices, fake, tmp_path), spec_for(prompt))
        sent = chat_requests(fake, "lodash 4.18 bump")
    assert obs.error_kind is None, obs.error_message
    assert obs.fired() == ["dependency-upgrade-reviewer"]
    assert [(a.mechanism, a.rejected, a.turn) for a in obs.activations] == [("skill-tool", False, 0)]
    assert obs.final_answer == "Hold: 2 breaking changes."
    assert [(c.name, c.is_error) for c in obs.tool_calls] == [("activate_skill", False)]
    # The usage is the CLI's own figures, which are what the API's usageMetadata said, summed.
    assert len(sent) == 2 and obs.model_calls == 2 and obs.turns == 2
    expected_in = sum(prompt_tokens_for(r.body) for r in sent)
    expected_out = candidates_tokens_for(skill("dependency-upgrade-reviewer")) + candidates_tokens_for(
        text("Hold: 2 breaking changes."))
    assert (obs.usage.input_tokens, obs.usage.output_tokens) == (expected_in, expected_out)
    assert obs.first_turn_input_tokens == prompt_tokens_for(sent[0].body)
    assert obs.cost_usd == pytest.approx(prices.cost(MODEL, obs.usage)) and obs.cost_basis == "reported"
    assert obs.bounds_hit == [] and obs.lost_replies == 0
    # The skill's body went back to the model; the key reached the API and nothing else.
    answer = json.dumps(sent[1].body["contents"][-1])
    assert "activated_skill" in answer and "dependency-upgrade-reviewer" in answer
    assert sent[0].headers["x-goog-api-key"] == KEY
    no_key_anywhere(obs)


def test_a_skill_that_does_not_fire_and_the_sessions_isolation(program, library, prices, tmp_path) -> None:
    prompt = "What is the capital of France?"
    with FakeGemini() as fake:
        fake.script("capital of France", text("Paris."), usage=Usage(5000, 3, thoughts_tokens=40))
        host = host_for(program, library, prices, fake, tmp_path)
        obs = run(host, spec_for(prompt))
        sent = chat_requests(fake, "capital of France")
    assert obs.error_kind is None, obs.error_message
    assert obs.fired() == [] and obs.activations == [] and obs.tool_calls == []
    assert obs.final_answer == "Paris." and obs.model_calls == 1
    # Thinking tokens are billed as output: the CLI's result leaves them out, its session log has them.
    assert (obs.usage.input_tokens, obs.usage.output_tokens) == (5000, 43)
    assert host.versions() == {"gemini-cli": "0.61.0"}
    # One request, with the policy's activate_skill offered, the library listed and the built-in skills off.
    assert len(sent) == 1 and len(fake.requests) == 1
    tools = [d["name"] for group in sent[0].body["tools"] for d in group["functionDeclarations"]]
    assert sorted(tools) == ["activate_skill", "glob", "grep_search", "read_file"]  # [run] allowed_tools' default
    system = "".join(part["text"] for part in sent[0].body["systemInstruction"]["parts"])
    assert "skill-creator" not in system and "antigravity-support" not in system
    for name, skill_ in library.skills.items():  # every description whole: the CLI cuts none
        assert f"<name>{name}</name>\n    <description>{skill_.fields['description']}</description>" in system
    assert list(tmp_path.iterdir()) == []  # the session folder is gone


def test_a_500_is_an_api_error_after_the_set_attempts(program, library, prices, tmp_path) -> None:
    with FakeGemini() as fake:
        fake.script("server falls over", error(500, "the fake server fell over"))
        obs = run(host_for(program, library, prices, fake, tmp_path), spec_for("The server falls over now"))
        sent = chat_requests(fake, "server falls over")
    assert obs.error_kind == "api-error"
    assert "500" in (obs.error_message or "") and "the fake server fell over" in (obs.error_message or "")
    assert len(sent) == 1  # general.maxAttempts = 1: no retry
    assert obs.fired() == [] and obs.final_answer is None and obs.bounds_hit == []
    assert obs.lost_replies == 0 and obs.cost_usd == 0.0  # an HTTP error is not billed
    no_key_anywhere(obs)


def test_a_429_is_rate_limited(program, library, prices, tmp_path) -> None:
    with FakeGemini() as fake:
        fake.script("quota is gone", error(429))
        obs = run(host_for(program, library, prices, fake, tmp_path), spec_for("The quota is gone today"))
    assert obs.error_kind == "rate-limited", obs.error_message
    assert obs.fired() == []


def test_a_cut_stream_is_an_api_error_and_its_partial_text_no_answer(program, library, prices, tmp_path) -> None:
    with FakeGemini() as fake:
        fake.script("cut me off", skill("dependency-upgrade-reviewer"), break_stream())
        obs = run(host_for(program, library, prices, fake, tmp_path), spec_for("Please cut me off after the skill"))
        sent = chat_requests(fake, "cut me off")
    assert obs.error_kind == "api-error" and "cut" in (obs.error_message or "")
    assert [r.outcome for r in sent] == ["function_call", "break_stream"]  # the CLI does not retry a cut stream
    assert obs.final_answer is None
    assert obs.fired() == ["dependency-upgrade-reviewer"]  # what happened before the cut is still observed
    # The first reply was read whole (its figures are the CLI's); the cut one may have been billed: a bound.
    assert obs.usage.input_tokens == prompt_tokens_for(sent[0].body)
    assert obs.lost_replies == 1 and obs.cost_basis != "reported"


def test_a_rejected_skill_call_never_fires(program, library, prices, tmp_path) -> None:
    """The skill left out of the session (a probe's control arm) is not in activate_skill's enum: the CLI refuses
    the call (invalid_tool_params) and the model answers anyway."""
    with FakeGemini() as fake:
        fake.script("migrate the database", skill("migration-planner"), text("I could not load it; here is a plan."))
        obs = run(host_for(program, library, prices, fake, tmp_path),
                  spec_for("Please migrate the database schema", exclude=["migration-planner"]))
        sent = chat_requests(fake, "migrate the database")
    assert obs.error_kind is None, obs.error_message
    assert [(a.name, a.rejected) for a in obs.activations] == [("migration-planner", True)]
    assert obs.fired() == []
    assert [(c.name, c.is_error) for c in obs.tool_calls] == [("activate_skill", True)]
    assert "<name>migration-planner</name>" not in json.dumps(sent[0].body["systemInstruction"])
    assert obs.final_answer == "I could not load it; here is a plan."


def test_a_session_that_hangs_is_killed_at_its_timeout(program, library, prices, tmp_path) -> None:
    with FakeGemini() as fake:
        fake.script("take forever", skill("dependency-upgrade-reviewer"), hang(60))
        started = time.monotonic()
        obs = run(host_for(program, library, prices, fake, tmp_path), spec_for("Please take forever to answer", 10.0))
        took = time.monotonic() - started
        sent = chat_requests(fake, "take forever")
    assert obs.error_kind == "timeout" and obs.bounds_hit == ["timeout"]
    assert took >= 10 and [r.outcome for r in sent] == ["function_call", "hang"]  # not before its bound
    assert obs.fired() == ["dependency-upgrade-reviewer"]
    # No result event came: the usage is the session log's, the first reply's figures.
    assert obs.usage.input_tokens == prompt_tokens_for(sent[0].body)
    assert obs.usage.output_tokens == candidates_tokens_for(skill("dependency-upgrade-reviewer"))
    assert obs.lost_replies == 1 and obs.final_answer is None
    assert list(tmp_path.iterdir()) == []


def test_the_turn_limit_is_a_bound_not_an_error(program, library, prices, tmp_path) -> None:
    with FakeGemini() as fake:
        fake.script("keep reading", function_call("read_file", {"file_path": "README.md"}),
                    function_call("read_file", {"file_path": "README.md"}), text("never reached"))
        obs = run(host_for(program, library, prices, fake, tmp_path), spec_for("Please keep reading files", max_turns=1))
    assert obs.error_kind is None, obs.error_message
    assert obs.bounds_hit == ["max-turns"]
    assert [c.name for c in obs.tool_calls] == ["read_file"] and obs.model_calls == 1


def test_the_surface_audit_lists_exactly_the_librarys_skills(program, library, prices, tmp_path) -> None:
    """Gemini CLI ignores `disable-model-invocation`: the example's manual-only release-publisher is listed (and
    callable) like the others."""
    with FakeGemini() as fake:  # never called: the audit runs against the host's own capture endpoint
        host = host_for(program, library, prices, fake, tmp_path)
        names = set(library.skills)
        invocable = {name for name, skill_ in library.skills.items() if not skill_.manual_only}
        assert invocable < names
        try:
            surface = asyncio.run(host.surface(MODEL, names, invocable))
        finally:
            host.close()
        assert fake.requests == []
    assert surface.error is None
    assert sorted(surface.with_description) == sorted(names) and surface.name_only == []
    assert surface.not_from_library == [] and surface.missing == []
    assert surface.listing_budget_chars is None and surface.listing_chars > 0
    assert "activate_skill" in surface.tools and "read_file" in surface.tools


def test_the_registry_makes_the_host_and_host_max_retries_bounds_the_clis_attempts(program, library, prices,
                                                                                   tmp_path) -> None:
    """`[run] host_max_retries` = 1 gives the CLI 2 attempts: one 503, then the answer (the CLI backs off ~5 s)."""
    with FakeGemini() as fake:
        fake.script("flaky backend", error(503, times=1), text("Answered on the second attempt."))
        settings = Settings(run=RunSettings(host_max_retries=1))
        host = make_host("gemini", HostInputs(library, settings, prices, KEY, fake.url, run_folder=tmp_path / "run"))
        assert isinstance(host, AgentCliHost) and isinstance(host.cli, GeminiCli)
        assert host.cli.program == program and host.cli.max_attempts == 2
        assert host.cli.tools == ["activate_skill", "read_file", "glob", "grep_search"]
        obs = run(host, spec_for("A flaky backend answers late", timeout_s=30))
        sent = chat_requests(fake, "flaky backend")
    assert obs.error_kind is None, obs.error_message
    assert [r.outcome for r in sent] == ["error 503", "text"]
    assert obs.final_answer == "Answered on the second attempt." and obs.model_calls == 1
    assert obs.usage.input_tokens == prompt_tokens_for(sent[1].body)  # the refused request cost nothing
