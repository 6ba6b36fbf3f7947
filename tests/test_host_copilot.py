"""The copilot host: the real GitHub Copilot CLI (npm @github/copilot at its pinned version) against the scripted fake
Messages API through its Anthropic-type provider, offline (real HTTP to 127.0.0.1, no key, no GitHub login).

The reader's own rules are checked first on lines written here, without the CLI (the fast tier)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.core.host_traits import traits
from runner.core.observation import Observation, SessionSpec, Usage
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.agent_cli import AgentCliHost
from runner.hosts.copilot import CopilotReader, listing
from runner.hosts.prices import PriceTable
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs, make_host
from runner.testing.fake_anthropic import FakeAnthropic, break_stream, error, hang, text, tool
from tests.agent_clis import require_cli

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "library"
KEY = "sk-test-copilot-marker-7"
MODEL = "claude-haiku-4-5"
INVOCABLE = {"dependency-upgrade-reviewer", "incident-postmortem-writer", "migration-planner", "test-report-triage"}


def event(kind: str, **data: object) -> str:
    return json.dumps({"type": kind, "data": data, "id": "e", "timestamp": "t"})


def test_the_reader_counts_an_accepted_skill_call_and_rejects_a_failed_one(tmp_path: Path) -> None:
    spec = SessionSpec(attempt_id="a", uid="u", prompt="p", model=MODEL, max_turns=3, timeout_s=5)
    reader = CopilotReader(spec, tmp_path, {})
    for line in (
        event("assistant.message", turnId="0", content="", toolRequests=[
            {"toolCallId": "c1", "name": "skill", "arguments": {"skill": "migration-planner"}},
            {"toolCallId": "c2", "name": "skill", "arguments": {"skill": "no-such-skill"}}]),
        event("tool.execution_complete", toolCallId="c1", success=True),
        event("tool.execution_complete", toolCallId="c2", success=False, error={"message": "Skill not found"}),
        event("model.call_failure", model=MODEL),  # no status: a cut reply, billed and lost
        event("model.call_failure", model=MODEL, statusCode=500),  # an error status: nothing billed
        event("assistant.message", turnId="1", content="done", toolRequests=[]),
        "not json at all",
        event("result", exitCode=0),
    ):
        reader.line(line)
    log = tmp_path / "session-state" / "s1" / "events.jsonl"
    log.parent.mkdir(parents=True)
    log.write_text("\n".join(json.dumps({"type": "session.usage_record", "data": {"usage": usage}}) for usage in (
        {"inputTokens": 100, "outputTokens": 7, "cacheReadTokens": 5, "cacheWriteTokens": 3},
        {"inputTokens": 50, "outputTokens": 2})) + "\n", encoding="utf-8")
    outcome = reader.outcome()
    assert [(a.name, a.rejected) for a in outcome.activations] == [("migration-planner", False),
                                                                   ("no-such-skill", True)]
    assert outcome.final_answer == "done" and outcome.turns == 2 and outcome.ended
    # The CLI's inputTokens hold its cache reads and writes; the API's input_tokens do not.
    assert outcome.usage == Usage(input_tokens=142, output_tokens=9, cache_read_input_tokens=5,
                                  cache_creation_input_tokens=3)
    assert outcome.model_calls == 2 and outcome.first_turn_input_tokens == 100 and outcome.lost_replies == 1
    assert outcome.error_kind == "malformed"  # a line that is not JSON is never passed over


def test_the_listing_is_read_from_available_skills_and_the_additional_line() -> None:
    system = ("<skill>\n<available_skills>\n<skill>\n  <name>a</name>\n  <description>first</description>\n"
              "  <location>project</location>\n</skill>\n</available_skills>\n</skill>\n"
              "Additional skills available (invoke by name): b, c\n")
    found = listing([{"system": [{"type": "text", "text": "x"}, {"type": "text", "text": system}],
                      "tools": [{"name": "skill"}, {"name": "view"}]}])
    assert found is not None
    described, named, _, tools = found
    assert (described, named, tools) == (["a"], ["b", "c"], ["skill", "view"])


# ---- the real CLI --------------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def library() -> Library:
    lib, _ = load_library(EXAMPLE, Settings())
    return lib


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return load_prices(Settings())


@pytest.fixture(scope="module")
def fake():
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def host(library: Library, prices: PriceTable, fake: FakeAnthropic) -> AgentCliHost:
    require_cli("copilot")
    made = make_host("copilot", HostInputs(library=library, settings=Settings(), prices=prices, api_key=KEY,
                                           base_url=fake.url))
    assert isinstance(made, AgentCliHost)
    return made


def run(host: AgentCliHost, prompt: str, timeout_s: float = 60, max_turns: int = 5) -> Observation:
    obs = asyncio.run(host.run(SessionSpec(attempt_id=f"a-{abs(hash(prompt))}", uid="u", prompt=prompt, model=MODEL,
                                           max_turns=max_turns, timeout_s=timeout_s, max_usd=0.5)))
    assert KEY not in obs.model_dump_json(), "the API key leaked into the observation"
    return obs


def billed_usage(fake: FakeAnthropic, match: str) -> Usage:
    total = Usage()
    for billed in fake.billed_for(match):
        total = total.add(Usage(input_tokens=billed.usage.input_tokens, output_tokens=billed.usage.output_tokens,
                                cache_creation_input_tokens=billed.usage.cache_creation_input_tokens,
                                cache_read_input_tokens=billed.usage.cache_read_input_tokens))
    return total


def test_a_skill_the_model_calls_fires_with_the_clis_own_token_figures(host, fake, prices) -> None:
    fire, quiet = "COPILOT-FIRE plan the migration", "COPILOT-QUIET say hello"
    fake.script(fire, tool("skill", {"skill": "migration-planner"}), text("planned"))
    fake.script(quiet, text("hello"))
    obs = run(host, fire)
    assert obs.error_kind is None and obs.fired() == ["migration-planner"]
    assert [(a.mechanism, a.rejected) for a in obs.activations] == [("skill-tool", False)]
    assert obs.final_answer == "planned" and obs.model_calls == 2 and obs.bounds_hit == []
    assert obs.usage == billed_usage(fake, fire) and obs.usage.input_tokens > 0
    assert obs.cost_usd == pytest.approx(prices.cost(MODEL, obs.usage)) and obs.cost_basis == "reported"
    first = fake.requests_for(fire)[0]
    assert first.headers.get("x-api-key") == KEY and first.path == "/v1/messages"
    assert traits("copilot").activation_grade == "tool-event"

    silent = run(host, quiet)
    assert silent.error_kind is None and silent.fired() == [] and silent.final_answer == "hello"
    assert silent.usage == billed_usage(fake, quiet)


def test_a_skill_call_the_cli_refuses_never_fires(host, fake) -> None:
    prompt = "COPILOT-UNKNOWN use a skill that is not there"
    fake.script(prompt, tool("skill", {"skill": "no-such-skill"}), text("could not"))
    obs = run(host, prompt)
    assert obs.error_kind is None and obs.fired() == []
    assert [(a.name, a.rejected) for a in obs.activations] == [("no-such-skill", True)]
    assert obs.tool_calls[0].is_error is True


def test_a_cut_stream_is_retried_and_its_lost_reply_charged_a_bound(host, fake) -> None:
    prompt = "COPILOT-CUT answer after a cut"
    fake.script(prompt, break_stream(times=1), text("after the cut"))
    obs = run(host, prompt)
    assert obs.error_kind is None and obs.final_answer == "after the cut"
    assert obs.lost_replies == 1 and obs.cost_basis == "bound" and obs.bound_usd > 0
    assert obs.cost_usd >= obs.bound_usd + 0.0 and [r.outcome for r in fake.requests_for(prompt)] == [
        "break_stream", "text"]


def test_a_lasting_500_is_an_api_error_after_the_clis_retries(host, fake) -> None:
    prompt = "COPILOT-500 the API fails"
    fake.script(prompt, error(500, "api_error", "fake failure"))
    obs = run(host, prompt)
    assert obs.error_kind == "api-error" and "500" in (obs.error_message or "")
    assert obs.final_answer is None and obs.fired() == []
    assert obs.lost_replies == 0 and obs.cost_usd == 0  # error statuses are not billed; the CLI ended its session
    assert len(fake.requests_for(prompt)) >= 2  # the CLI retried before it gave up


def test_a_session_that_outlives_its_bound_is_killed_and_charged_its_bound(host, fake) -> None:
    prompt = "COPILOT-HANG the API never answers"
    fake.script(prompt, hang(60))
    obs = run(host, prompt, timeout_s=4)
    assert obs.error_kind == "timeout" and obs.bounds_hit == ["timeout"]
    assert obs.cost_basis in ("bound", "reservation") and obs.cost_usd > 0


def test_the_surface_audit_lists_exactly_the_librarys_invocable_skills(host, library) -> None:
    surface = asyncio.run(host.surface(MODEL, set(library.skills), INVOCABLE))
    assert surface.error is None, surface.error
    assert set(surface.with_description) == INVOCABLE and surface.name_only == [] and surface.missing == []
    assert "skill" in surface.tools and surface.listing_chars > 0


def test_a_session_past_its_turn_bound_is_ended_there(host, fake) -> None:
    """The CLI takes no turn limit: the host ends the session when it starts a turn past max_turns."""
    prompt = "COPILOT-TURNS keep looking"
    fake.script(prompt, *[tool("glob", {"pattern": f"*{i}"}) for i in range(6)], text("never reached"))
    obs = run(host, prompt, max_turns=2)
    assert obs.bounds_hit == ["max-turns"] and obs.error_kind is None and obs.final_answer is None
    assert 2 <= len(fake.requests_for(prompt)) <= 3  # the third turn may have been sent before it was stopped
    assert obs.lost_replies == 1 and obs.cost_basis in ("bound", "reservation")
