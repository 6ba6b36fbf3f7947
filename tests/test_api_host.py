"""The api host against the scripted fake Messages API (real HTTP to 127.0.0.1, the real `anthropic`
SDK, no mocks), and the replay host against a run folder written by hand."""

from __future__ import annotations

import asyncio
import json
import tempfile
from pathlib import Path

import pytest

from runner.core.observation import Activation, ListingSeen, Observation, SessionSpec, ToolCall, Usage
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import ListingSettings, Settings
from runner.hosts.api import ApiHost
from runner.hosts.listing import estimate
from runner.hosts.prices import PriceTable
from runner.hosts.prices import load as load_prices
from runner.hosts.replay import ReplayHost
from runner.hosts.surface import LISTING_HEADER, parse_listing
from runner.hosts.workspace import LibraryFiles
from runner.testing.fake_anthropic import (
    FakeAnthropic,
    Recorded,
    blocks,
    break_stream,
    error,
    hang,
    input_tokens_for,
    malformed,
    output_tokens_for,
    skill,
    text,
    tool,
)
from runner.testing.fake_anthropic import Usage as FakeUsage
from tests.billed import billed_usd

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "library"
SKILLS = EXAMPLE / ".claude" / "skills"
KEY = "sk-test-marker-123"
MODEL = "claude-haiku-4-5"
INVOCABLE = ["dependency-upgrade-reviewer", "incident-postmortem-writer", "migration-planner", "test-report-triage"]
REFERENCE = ".claude/skills/migration-planner/references/expand-contract.md"
FIXED = FakeUsage(input_tokens=100, output_tokens=20, cache_creation_input_tokens=3, cache_read_input_tokens=7)


@pytest.fixture(scope="module")
def library() -> Library:
    lib, _ = load_library(EXAMPLE, Settings())
    return lib


@pytest.fixture(scope="module")
def prices() -> PriceTable:
    return load_prices(Settings())


@pytest.fixture
def fake():
    with FakeAnthropic() as server:
        yield server


def make_host(library: Library, prices: PriceTable, fake: FakeAnthropic, budget: int | None = None,
              max_retries: int = 2) -> ApiHost:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    return ApiHost(library, files, prices, KEY, fake.url, budget, max_retries=max_retries)


def make_spec(prompt: str, **overrides) -> SessionSpec:
    values = dict(attempt_id=f"x/evals/{abs(hash(prompt))}#main#1", uid="x/evals/1", prompt=prompt, model=MODEL,
                  max_turns=6, timeout_s=10, max_output_tokens=256)
    values.update(overrides)
    return SessionSpec(**values)


def run(host: ApiHost, spec: SessionSpec) -> Observation:
    obs = asyncio.run(host.run(spec))
    assert KEY not in obs.model_dump_json(), "the API key leaked into the observation"
    return obs


def acts(obs: Observation) -> list[tuple[str, str, int, bool]]:
    return [(a.name, a.mechanism, a.turn, a.rejected) for a in obs.activations]


def calls(fake: FakeAnthropic, prompt: str) -> list[Recorded]:
    return fake.requests_for(prompt)


def tool_results(request: Recorded) -> list[dict]:
    last = request.body["messages"][-1]
    assert last["role"] == "user"
    return [b for b in last["content"] if b["type"] == "tool_result"]


def result_text(block: dict) -> str:
    content = block["content"]
    return content if isinstance(content, str) else "".join(part["text"] for part in content)


# ---- selection ------------------------------------------------------------------------------------

def test_fires_one_skill_and_sums_usage(library, prices, fake):
    prompt = "Write the postmortem for yesterday's checkout outage"
    fake.script(prompt, skill("incident-postmortem-writer"), text("Here is the postmortem."))
    obs = run(make_host(library, prices, fake), make_spec(prompt))

    assert obs.ok and obs.error_kind is None and obs.host == "api"
    assert acts(obs) == [("incident-postmortem-writer", "skill-tool", 0, False)]
    assert obs.fired() == ["incident-postmortem-writer"]
    assert obs.final_answer == "Here is the postmortem."
    assert obs.turns == 2 and obs.bounds_hit == []
    assert obs.tool_calls == [ToolCall(name="Skill", input='{"skill": "incident-postmortem-writer"}', turn=0,
                                       is_error=False)]
    requests = calls(fake, prompt)
    assert len(requests) == 2
    expected_in = sum(input_tokens_for(r.body) for r in requests)
    expected_out = (output_tokens_for(skill("incident-postmortem-writer"))
                    + output_tokens_for(text("Here is the postmortem.")))
    assert obs.usage == Usage(input_tokens=expected_in, output_tokens=expected_out)
    assert obs.cost_usd == prices.cost(MODEL, obs.usage) and obs.cost_usd > 0
    assert obs.host_cost_usd is None

    # The request: model, bound, Claude Code's Skill schema, the key in the header only.
    first = requests[0]
    assert KEY in (first.headers.get("x-api-key", "") + first.headers.get("authorization", ""))
    assert first.body["model"] == MODEL and first.body["max_tokens"] == 256 and not first.body.get("stream")
    tools = {t["name"]: t for t in first.body["tools"]}
    assert sorted(tools) == ["Read", "Skill"]
    assert tools["Skill"]["input_schema"] == {"type": "object", "properties": {"skill": {"type": "string"},
                                                                                "args": {"type": "string"}},
                                              "required": ["skill"]}
    assert first.body["messages"] == [{"role": "user", "content": prompt}]
    # The tool result: "Launching skill", then the body of the session's copy, frontmatter stripped.
    [result] = tool_results(requests[1])
    body = result_text(result)
    assert body.startswith("Launching skill: incident-postmortem-writer")
    assert library.skills["incident-postmortem-writer"].body.strip() in body
    assert "description:" not in body and not result.get("is_error")
    # The transcript: system, prompt, then responses and tool results as plain dicts.
    assert obs.transcript[0]["role"] == "system" and LISTING_HEADER in obs.transcript[0]["content"]
    assert obs.transcript[1] == {"role": "user", "content": prompt}
    assert [m["role"] for m in obs.transcript[2:]] == ["assistant", "user", "assistant"]
    json.dumps(obs.transcript)


def test_fires_two_skills_in_order_with_fixed_usage(library, prices, fake):
    prompt = "Plan the column rename and review the ORM upgrade"
    fake.script(prompt, skill("migration-planner"), skill("dependency-upgrade-reviewer"), text("done both"),
                usage=FIXED)
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert acts(obs) == [("migration-planner", "skill-tool", 0, False),
                         ("dependency-upgrade-reviewer", "skill-tool", 1, False)]
    assert obs.fired() == ["migration-planner", "dependency-upgrade-reviewer"]
    assert obs.usage == Usage(input_tokens=300, output_tokens=60, cache_creation_input_tokens=9,
                              cache_read_input_tokens=21)
    assert obs.cost_usd == pytest.approx((300 * 1 + 60 * 5 + 9 * 1.25 + 21 * 0.1) / 1e6)
    assert obs.turns == 3 and obs.final_answer == "done both"


def test_fires_nothing(library, prices, fake):
    prompt = "What is the capital of France?"
    fake.script(prompt, text("Paris."))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert obs.ok and obs.activations == [] and obs.tool_calls == [] and obs.fired() == []
    assert obs.final_answer == "Paris." and obs.turns == 1 and obs.bounds_hit == []


def test_skill_after_other_tools_still_counts(library, prices, fake):
    prompt = "Rename the users.email column safely"
    fake.script(prompt, tool("Read", {"file_path": REFERENCE}), tool("Read", {"file_path": REFERENCE}),
                skill("migration-planner"), text("plan"))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert acts(obs) == [("migration-planner", "skill-tool", 2, False)]
    assert [(c.name, c.turn, c.is_error) for c in obs.tool_calls] == [("Read", 0, False), ("Read", 1, False),
                                                                      ("Skill", 2, False)]
    assert obs.tool_calls[0].input == json.dumps({"file_path": REFERENCE})
    requests = calls(fake, prompt)
    [read] = tool_results(requests[1])
    assert result_text(read) == (EXAMPLE / REFERENCE).read_text(encoding="utf-8")
    assert obs.final_answer == "plan" and obs.turns == 4


def test_several_tool_uses_in_one_message(library, prices, fake):
    prompt = "Triage this test report and check the checklist"
    fake.script(prompt, blocks("Let me look.", tool("Read", {"file_path": REFERENCE}), skill("test-report-triage")),
                text("triaged"))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert acts(obs) == [("test-report-triage", "skill-tool", 0, False)]
    assert len(tool_results(calls(fake, prompt)[1])) == 2
    assert obs.final_answer == "triaged"


def test_unknown_manual_only_and_excluded_skills_are_rejected(library, prices, fake):
    prompt = "Publish the release notes"
    fake.script(prompt, skill("no-such-skill"), skill("release-publisher"), skill("migration-planner"),
                text("could not"))
    obs = run(make_host(library, prices, fake), make_spec(prompt, exclude_skills=["migration-planner"]))
    assert obs.ok
    assert acts(obs) == [("no-such-skill", "skill-tool", 0, True), ("release-publisher", "skill-tool", 1, True),
                         ("migration-planner", "skill-tool", 2, True)]
    assert obs.fired() == []
    assert [c.is_error for c in obs.tool_calls] == [True, True, True]
    requests = calls(fake, prompt)
    [rejected] = tool_results(requests[1])
    assert rejected["is_error"] is True and result_text(rejected) == "Unknown skill: no-such-skill"
    assert result_text(tool_results(requests[2])[0]) == "Unknown skill: release-publisher"
    # The excluded skill is absent from the listing entirely.
    assert obs.listing is not None
    assert "migration-planner" not in obs.listing.with_description + obs.listing.name_only
    assert not [line for line in requests[0].body["system"].splitlines() if line.startswith("- migration-planner")]


def test_read_confined_to_the_project_and_skill_md_read_is_an_activation(library, prices, fake):
    prompt = "Look around the filesystem"
    fake.script(prompt, tool("Read", {"file_path": "../../../../../../etc/hostname"}),
                tool("Read", {"file_path": "/etc/passwd"}), tool("Read", {"file_path": "nope.txt"}),
                tool("Read", {"file_path": ".claude/skills/test-report-triage/SKILL.md"}), text("ok then"))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert [c.is_error for c in obs.tool_calls] == [True, True, True, False]
    assert acts(obs) == [("test-report-triage", "skill-md-read", 3, False)]
    requests = calls(fake, prompt)
    for request in requests[1:4]:
        [result] = tool_results(request)
        assert result["is_error"] is True and "root:" not in result_text(result)
    assert result_text(tool_results(requests[4])[0]).startswith("---\nname: test-report-triage")


# ---- bounds -----------------------------------------------------------------------------------------

def test_max_turns_bound(library, prices, fake):
    prompt = "Keep reading forever"
    fake.script(prompt, *[tool("Read", {"file_path": REFERENCE}) for _ in range(5)], text("never"))
    obs = run(make_host(library, prices, fake), make_spec(prompt, max_turns=2))
    assert obs.ok and obs.bounds_hit == ["max-turns"] and obs.final_answer is None
    assert obs.turns == 2 and len(calls(fake, prompt)) == 2 and len(obs.tool_calls) == 2


def test_max_budget_bound(library, prices, fake):
    prompt = "Anything at all"
    fake.script(prompt, text("answer"))
    obs = run(make_host(library, prices, fake), make_spec(prompt, max_usd=1e-9))
    assert obs.ok and obs.bounds_hit == ["max-budget"] and obs.turns == 0 and obs.final_answer is None
    assert calls(fake, prompt) == []
    roomy = run(make_host(library, prices, fake), make_spec(prompt, max_usd=1.0))
    assert roomy.bounds_hit == [] and roomy.final_answer == "answer"


def test_timeout_well_before_the_hang_ends(library, prices, fake):
    prompt = "This one hangs"
    fake.script(prompt, hang(60))
    obs = run(make_host(library, prices, fake), make_spec(prompt, timeout_s=1.5))
    # The request reached the hang and its "late" reply never reached the session: the timeout cut it (had the
    # session waited the hang out, it would have answered "late" and ended without an error).
    assert [r.outcome for r in calls(fake, prompt)] == ["hang"]
    assert obs.error_kind == "timeout" and "timeout" in obs.bounds_hit and obs.final_answer is None


def test_workspace_is_removed(library, prices, fake, tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    prompt = "Write the postmortem"
    fake.script(prompt, skill("incident-postmortem-writer"), text("ok"))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert obs.fired() == ["incident-postmortem-writer"]
    assert list(tmp_path.iterdir()) == []


# ---- errors ------------------------------------------------------------------------------------------

def test_500_every_time_is_api_error_after_the_sdk_retries(library, prices, fake):
    prompt = "Server always fails"
    fake.script(prompt, error(500))
    obs = run(make_host(library, prices, fake, max_retries=2), make_spec(prompt))
    assert obs.error_kind == "api-error" and "500" in (obs.error_message or "")
    assert len(calls(fake, prompt)) == 3 and obs.turns == 0 and obs.final_answer is None


def test_529_once_then_success(library, prices, fake):
    prompt = "Overloaded once"
    fake.script(prompt, error(529, "overloaded_error", times=1), text("fine"))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert obs.ok and obs.final_answer == "fine" and obs.turns == 1
    assert len(calls(fake, prompt)) == 2


def test_429_with_retry_after_is_rate_limited(library, prices, fake):
    prompt = "Rate limited always"
    fake.script(prompt, error(429, "rate_limit_error", retry_after=0.05))
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert obs.error_kind == "rate-limited" and len(calls(fake, prompt)) == 3


def test_429_without_retry_after_is_spend_limit(library, prices, fake):
    prompt = "Spend limit reached"
    fake.script(prompt, error(429, "rate_limit_error"))
    obs = run(make_host(library, prices, fake, max_retries=1), make_spec(prompt))
    # One request, not 1 + max_retries: the client's SpendLimitMiddleware raises at the first response and the
    # SDK does not retry what a middleware raises (issue 13); a retry could never succeed.
    assert obs.error_kind == "spend-limit" and len(calls(fake, prompt)) == 1


def test_cut_connection_is_api_error(library, prices, fake):
    prompt = "Connection cut"
    fake.script(prompt, break_stream())
    obs = run(make_host(library, prices, fake, max_retries=1), make_spec(prompt))
    assert obs.error_kind == "api-error" and not obs.ok and len(calls(fake, prompt)) == 2


def test_unreadable_body_is_malformed(library, prices, fake):
    prompt = "Garbage body"
    fake.script(prompt, skill("migration-planner"), malformed())
    obs = run(make_host(library, prices, fake), make_spec(prompt))
    assert obs.error_kind == "malformed" and not obs.ok and obs.final_answer is None
    # What was observed before the failure is kept.
    assert acts(obs) == [("migration-planner", "skill-tool", 0, False)] and obs.turns == 1
    # The turn read is reported; the unreadable reply was billed too (issue 28): charged its bound, said so.
    reported = prices.cost(MODEL, obs.usage)
    assert obs.usage.input_tokens > 0 and obs.lost_replies == 1 and obs.cost_basis == "bound"
    assert obs.cost_usd == pytest.approx(reported + obs.bound_usd) and obs.bound_usd > 0
    assert obs.cost_usd >= billed_usd(fake, prices)


# ---- the listing ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("budget", [300, 1300, None])
def test_listing_follows_the_budget(library, prices, fake, budget):
    host = make_host(library, prices, fake, budget=budget)
    listing, with_description, name_only = host.build_listing([])
    expected = estimate(library, ListingSettings(budget_chars=budget), host="api")
    assert (with_description, name_only) == (expected.with_description, expected.name_only)
    assert sorted(with_description + name_only) == INVOCABLE
    if budget == 300:
        assert with_description == [] and name_only == INVOCABLE
    if budget == 1300:
        assert with_description and name_only
    if budget is None:
        assert name_only == []

    prompt = f"Which skill for budget {budget}?"
    fake.script(prompt, text("none"))
    obs = run(host, make_spec(prompt))
    assert obs.listing == ListingSeen(with_description=with_description, name_only=name_only)
    system = calls(fake, prompt)[0].body["system"]
    assert system.endswith(listing) and LISTING_HEADER in system
    lines = system.splitlines()
    for name in name_only:
        assert f"- {name}" in lines
    for name in with_description:
        assert f"- {name}: {library.skills[name].description}" in lines
    assert not [line for line in lines if line.startswith("- release-publisher")]
    assert parse_listing(system) == (with_description, name_only)


def test_surface_without_any_call(library, prices, fake):
    host = make_host(library, prices, fake, budget=1300)
    invocable = {name for name, skill in library.skills.items() if not skill.manual_only}
    surface = asyncio.run(host.surface(MODEL, set(library.skills), invocable))
    listing, with_description, name_only = host.build_listing([])
    assert surface.host == "api" and surface.listing_budget_chars == 1300
    assert (surface.with_description, surface.name_only) == (with_description, name_only)
    assert surface.listing_chars == len(listing) and surface.request_chars > len(listing)
    assert surface.tools == ["Skill", "Read"] and surface.missing == [] and surface.error is None
    assert fake.requests == []
    assert host.versions()["host"] == "api-approximation" and "anthropic" in host.versions()
    assert KEY not in repr(host)


# ---- replay ---------------------------------------------------------------------------------------------

def test_replay_rebuilds_recorded_observations(tmp_path):
    run_dir = tmp_path / "run"
    (run_dir / "transcripts").mkdir(parents=True)
    transcript = [
        {"role": "user", "content": "plan the migration"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Skill",
                                           "input": {"skill": "nope"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "is_error": True,
                                      "content": "Unknown skill: nope"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t2", "name": "Skill",
                                           "input": {"skill": "migration-planner"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t2", "content": "Launching skill"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "the plan"}]},
    ]
    (run_dir / "transcripts" / "a.json").write_text(json.dumps(transcript), encoding="utf-8")
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
    base = dict(uid="m/evals/1", arm="main", repeat=1, plan_hash="h", status="finished", error_message=None,
                bounds_hit=[], usage=usage, host_cost_usd=None, reserved_usd=0.1, duration_s=1.5)
    records = [
        dict(base, attempt_id="m/evals/1#main#1", error_kind=None, turns=3, cost_usd=0.01,
             transcript="transcripts/a.json", final_answer="the plan", outcome={"state": "PASS", "fired": ["migration-planner"]}),
        dict(base, attempt_id="m/evals/1#main#2", error_kind="timeout", error_message="too slow", turns=1,
             cost_usd=0.002, transcript=None, final_answer=None, bounds_hit=["timeout"],
             outcome={"state": "ERROR", "fired": ["test-report-triage"]}),
    ]
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records) + '{"torn', encoding="utf-8")
    host = ReplayHost(run_dir)
    assert host.versions() == {"host": "replay", "source_run": str(run_dir)}

    obs = asyncio.run(host.run(make_spec("x", attempt_id="m/evals/1#main#1")))
    assert obs.host == "replay" and obs.ok
    assert acts(obs) == [("nope", "skill-tool", 0, True), ("migration-planner", "skill-tool", 1, False)]
    assert obs.fired() == ["migration-planner"] and obs.final_answer == "the plan"
    assert obs.usage == Usage(input_tokens=10, output_tokens=5) and obs.cost_usd == 0.01 and obs.turns == 3
    assert obs.transcript == transcript and obs.duration_s == 1.5

    errored = asyncio.run(host.run(make_spec("x", attempt_id="m/evals/1#main#2")))
    assert errored.error_kind == "timeout" and errored.error_message == "too slow"
    assert errored.bounds_hit == ["timeout"] and errored.transcript == []
    assert errored.activations == [Activation(name="test-report-triage", mechanism="skill-tool", turn=0)]

    missing = asyncio.run(host.run(make_spec("x", attempt_id="m/evals/1#main#9")))
    assert missing.error_kind == "ambiguous" and "not recorded" in (missing.error_message or "")
