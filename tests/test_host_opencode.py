"""The opencode host (issue 36): the real OpenCode CLI (npm opencode-ai at its pin, `skill-evals hosts install
opencode`) run through the host's `run(spec)` against runner.testing.fake_anthropic on 127.0.0.1.
Its reader on streams recorded from the same CLI: tests/test_host_opencode_reader.py.

The library is runner.testing.trigger_set's three skills; the fake plays OpenCode's `skill` tool (input `name`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from runner.core.observation import Observation, SessionSpec
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.agent_cli import AgentCliHost
from runner.hosts.opencode import PERMISSIONS
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs, make_host
from runner.testing import trigger_set
from runner.testing.fake_anthropic import FakeAnthropic, break_stream, error, hang, text, tool
from tests.agent_clis import require_cli
from tests.billed import billed_usd
from tests.conftest import EXAMPLE

KEY = "sk-test-opencode-36"
MODEL = "claude-sonnet-4-6"  # priced in the run's table
LIBRARY_SKILLS = sorted([trigger_set.SKILL, *trigger_set.NEIGHBOURS])


def skill(name: str) -> object:
    """OpenCode's skill tool call as the model sends it."""
    return tool("skill", {"name": name})


def spec(prompt: str, timeout_s: float = 60) -> SessionSpec:
    return SessionSpec(attempt_id=prompt[:20], uid=prompt[:20], prompt=prompt, model=MODEL, max_turns=4,
                       timeout_s=timeout_s, max_usd=0.5)


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as server:
        yield server


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory, fake: FakeAnthropic) -> Iterator[AgentCliHost]:
    require_cli("opencode")
    root = trigger_set.write_library(tmp_path_factory.mktemp("library"))
    settings = Settings()
    library, _ = load_library(root, settings)
    made = make_host("opencode", HostInputs(library=library, settings=settings, prices=load_prices(settings),
                                            api_key=KEY, base_url=fake.url))
    assert isinstance(made, AgentCliHost)
    yield made
    made.close()


def run(host: AgentCliHost, session: SessionSpec) -> Observation:
    return asyncio.run(host.run(session))


def test_a_skill_that_fires_is_a_tool_event_with_opencodes_own_usage(host: AgentCliHost,
                                                                     fake: FakeAnthropic) -> None:
    prompt = "Pull the totals out of this invoice PDF for me"
    fake.script(prompt, skill(trigger_set.SKILL), text("The totals are 42."))
    obs = run(host, spec(prompt))
    assert obs.error_kind is None, obs.error_message
    assert obs.fired() == [trigger_set.SKILL]
    assert [(a.mechanism, a.rejected) for a in obs.activations] == [("skill-tool", False)]
    assert obs.final_answer == "The totals are 42."
    assert obs.host == "opencode" and obs.model_calls == 2
    requests = fake.requests_for(prompt)
    assert [r.path for r in requests] == ["/v1/messages", "/v1/messages"]  # no title request, no ?beta=true
    assert requests[0].body["messages"][0]["content"][0]["text"] == prompt  # on stdin: sent as typed
    # The usage is OpenCode's own (step_finish): what the fake billed, request by request.
    billed = fake.billed_for(prompt)
    assert obs.usage.output_tokens == sum(b.usage.output_tokens for b in billed)
    assert obs.usage.cache_read_input_tokens == sum(b.usage.cache_read_input_tokens for b in billed)
    assert obs.usage.cache_creation_input_tokens == sum(b.usage.cache_creation_input_tokens for b in billed)
    assert obs.usage.input_tokens == sum(b.usage.input_tokens for b in billed)
    assert obs.cost_basis == "reported" and obs.cost_usd == pytest.approx(billed_usd(fake, match=prompt))
    # The skill's own text reached the model: OpenCode loaded it from the session's .agents/skills.
    second = str(requests[1].body["messages"])
    assert "skill_content" in second and "/.agents/skills/invoice-scanner" in second
    assert KEY not in str(obs.transcript)


def test_a_skill_that_does_not_fire(host: AgentCliHost, fake: FakeAnthropic) -> None:
    prompt = "Write a haiku about the sea"
    fake.script(prompt, text("Waves fold into foam."))
    obs = run(host, spec(prompt))
    assert obs.error_kind is None, obs.error_message
    assert obs.fired() == [] and obs.activations == []
    assert obs.final_answer == "Waves fold into foam." and obs.model_calls == 1
    # The request offered the skill tool and the read-only tools only (PERMISSIONS), nothing left at "ask".
    tools = sorted(t["name"] for t in fake.requests_for(prompt)[0].body["tools"])
    assert tools == sorted(name for name, rule in PERMISSIONS.items() if rule == "allow")


def test_an_unknown_skill_call_is_rejected_and_never_fires(host: AgentCliHost, fake: FakeAnthropic) -> None:
    prompt = "Check that this invoice's subtotal adds up"
    fake.script(prompt, skill("no-such-skill"), text("I could not load it."))
    obs = run(host, spec(prompt))
    assert obs.error_kind is None, obs.error_message
    assert [(a.name, a.rejected) for a in obs.activations] == [("no-such-skill", True)]
    assert obs.fired() == []
    assert obs.tool_calls[0].is_error is True


def test_a_500_is_retried_by_opencode_then_an_api_error(host: AgentCliHost, fake: FakeAnthropic) -> None:
    """OpenCode retries a 5xx five times (no setting lowers it); retry-after 0 keeps the test short."""
    prompt = "Read the invoice number and due date from scan-0412.png"
    fake.script(prompt, error(500, "api_error", "fake: internal", retry_after=0))
    obs = run(host, spec(prompt))
    assert obs.error_kind == "api-error" and "HTTP 500" in (obs.error_message or "")
    assert obs.fired() == [] and obs.final_answer is None
    assert len(fake.requests_for(prompt)) == 6
    assert obs.lost_replies == 1 and obs.bounds_hit == []


def test_a_429_that_outlives_the_retries_is_rate_limited(host: AgentCliHost, fake: FakeAnthropic) -> None:
    prompt = "Extract the vendor and VAT id from the invoice"
    fake.script(prompt, error(429, "rate_limit_error", "fake: slow down", retry_after=0))
    obs = run(host, spec(prompt))
    assert obs.error_kind == "rate-limited", obs.error_message
    assert obs.fired() == []


def test_a_cut_stream_is_retried_by_opencode_and_the_session_goes_on(host: AgentCliHost,
                                                                     fake: FakeAnthropic) -> None:
    """OpenCode retries a cut stream after ~2 s. Its JSON stream does not show the retry, its log does: the cut
    reply, which the API billed, is charged a bound (docs/hosts/opencode.md)."""
    prompt = "Turn these three invoice scans into one table"
    fake.script(prompt, break_stream(times=1), skill(trigger_set.SKILL), text("Table done."))
    obs = run(host, spec(prompt))
    assert obs.error_kind is None, obs.error_message
    assert obs.fired() == [trigger_set.SKILL] and obs.final_answer == "Table done."
    assert [r.outcome for r in fake.requests_for(prompt)] == ["break_stream", "tool_use", "text"]
    assert obs.model_calls == 2  # OpenCode's steps: the cut request is not among them
    assert obs.lost_replies == 1 and obs.cost_basis in ("bound", "reservation")
    assert obs.cost_usd >= billed_usd(fake, match=prompt) > 0


def test_a_turn_past_max_turns_ends_the_session_at_the_bound(host: AgentCliHost, fake: FakeAnthropic) -> None:
    prompt = "Find the payment terms on this invoice"
    fake.script(prompt, skill(trigger_set.SKILL), skill(trigger_set.NEIGHBOURS[0]), text("Net 30."))
    obs = run(host, spec(prompt).model_copy(update={"max_turns": 1}))
    assert obs.bounds_hit == ["max-turns"] and obs.error_kind is None
    assert obs.fired() == [trigger_set.SKILL] and obs.final_answer is None
    # Killed once the first request's tool call was answered: the second request may have gone (and is charged).
    assert len(fake.requests_for(prompt)) <= 2 and obs.lost_replies == 1


def test_a_session_that_outlives_its_bound_is_a_timeout(host: AgentCliHost, fake: FakeAnthropic) -> None:
    prompt = "Is the invoice from Northwind overdue?"
    fake.script(prompt, hang(30))
    obs = run(host, spec(prompt, timeout_s=6))
    assert obs.error_kind == "timeout" and obs.bounds_hit == ["timeout"]
    assert obs.fired() == [] and obs.final_answer is None


def test_the_surface_audit_lists_exactly_the_librarys_skills(host: AgentCliHost) -> None:
    surface = asyncio.run(host.surface(MODEL, set(LIBRARY_SKILLS), set(LIBRARY_SKILLS)))
    assert surface.error is None, surface.error
    assert surface.with_description == LIBRARY_SKILLS  # whole, sorted by name: OpenCode has no listing budget
    assert surface.name_only == [] and surface.missing == []
    assert surface.not_from_library == ["customize-opencode"]  # OpenCode's own built-in skill
    assert sorted(surface.tools) == sorted(name for name, rule in PERMISSIONS.items() if rule == "allow")
    assert surface.listing_chars > 0 and surface.request_chars > surface.listing_chars


def test_opencode_lists_and_loads_a_skill_its_library_keeps_from_the_model(fake: FakeAnthropic) -> None:
    """examples/library's release-publisher says `disable-model-invocation: true` (Claude Code lists it for `/` only);
    OpenCode 1.18.33 ignores the field: it lists the skill with its description and its skill tool loads it."""
    settings = Settings()
    library, _ = load_library(EXAMPLE, settings)
    manual = "release-publisher"
    names = set(library.skills)
    made = make_host("opencode", HostInputs(library=library, settings=settings, prices=load_prices(settings),
                                            api_key=KEY, base_url=fake.url))
    assert isinstance(made, AgentCliHost)
    try:
        surface = asyncio.run(made.surface(MODEL, names, names - {manual}))
        assert surface.error is None and manual in surface.with_description and surface.missing == []
        prompt = "Publish the approved release 4.2.0"
        fake.script(prompt, skill(manual), text("Published."))
        assert run(made, spec(prompt)).fired() == [manual]
    finally:
        made.close()
