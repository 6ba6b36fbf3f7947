"""The codex host end to end: the real Codex CLI (npm @openai/codex at its pinned version, `skill-evals hosts install
codex`) run through the host's own `run(spec)` and `surface()`, against the fake Responses API on 127.0.0.1
(runner.testing.fake_openai). No test reaches the internet or needs a key. Reading recorded output: tests/
test_codex_reader.py; the fake's wire format: tests/test_fake_openai.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from runner.core.host_traits import traits
from runner.core.observation import Observation, SessionSpec
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts import codex
from runner.hosts.agent_cli import AgentCliHost
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs
from runner.testing.fake_openai import (
    FakeOpenAI,
    break_stream,
    error,
    function_call,
    hang,
    input_tokens_for,
    items,
    output_tokens_for,
    read_skill,
    shell,
    text,
)
from tests.agent_clis import require_cli
from tests.conftest import AEGIS_SKILLS, EXAMPLE

KEY = "sk-codex-test-not-a-real-key"
MODEL = "gpt-5.5"  # in Codex 0.171.0's own catalog: context window 272,000 tokens
SKILL = "incident-postmortem-writer"
BUNDLED = ["imagegen", "openai-docs", "skill-creator", "skill-installer"]  # Codex's own skills


@pytest.fixture(scope="module")
def cli() -> Path:
    return require_cli("codex")


@pytest.fixture(scope="module")
def example() -> Library:
    return load_library(EXAMPLE, Settings())[0]


# A price for the test model, given in the settings as a repository would (the bundled table has no OpenAI model).
TEST_PRICE = {"input": 1.25, "output": 10.0, "cache_read": 0.125}


def make_host(library: Library, fake: FakeOpenAI, tmp_path: Path, retries: int = 0) -> AgentCliHost:
    """The host as the registry makes it (runner.hosts.codex.make), with Codex's retries as given."""
    settings = Settings.model_validate({"run": {"host": "codex", "model": MODEL, "host_max_retries": retries},
                                        "prices": {MODEL: TEST_PRICE}})
    host = codex.make(HostInputs(library=library, settings=settings, prices=load_prices(settings), api_key=KEY,
                                 base_url=fake.url + "/v1", run_folder=tmp_path / "run"))
    assert isinstance(host, AgentCliHost)
    return host


def run(host: AgentCliHost, prompt: str, timeout_s: float = 60, max_turns: int = 4) -> Observation:
    spec = SessionSpec(attempt_id="a1", uid="u1", prompt=prompt, model=MODEL, max_turns=max_turns,
                       timeout_s=timeout_s)
    return asyncio.run(host.run(spec))


def no_secret(obs: Observation) -> None:
    assert KEY not in json.dumps(obs.model_dump())


def test_a_skill_read_fires_with_codexs_own_figures(cli: Path, example: Library, tmp_path: Path) -> None:
    prompt = "Write the postmortem for last night's outage"
    with FakeOpenAI() as fake:
        fake.script(prompt, read_skill(SKILL), text("The postmortem, blameless."))
        obs = run(make_host(example, fake, tmp_path), prompt)
        requests = fake.requests_for(prompt)
    assert obs.error_kind is None, obs.error_message
    assert obs.fired() == [SKILL] and traits(obs.host).activation_grade == "file-read"
    [activation] = obs.activations
    assert (activation.mechanism, activation.turn, activation.rejected) == ("skill-md-read", 0, False)
    assert obs.final_answer == "The postmortem, blameless." and obs.bounds_hit == [] and obs.lost_replies == 0
    # The read really reached the model: the second request carries the SKILL.md Codex's command printed.
    [result] = [i["output"] for i in requests[1].body["input"] if i.get("type") == "function_call_output"]
    assert f"name: {SKILL}" in result and "Process exited with code 0" in result
    # Usage is Codex's own sum of what the fake reported for each response.
    assert obs.model_calls == obs.turns == len(requests) == 2
    assert obs.usage.input_tokens == sum(input_tokens_for(r.body) for r in requests)
    assert obs.usage.output_tokens == output_tokens_for(read_skill(SKILL)) + output_tokens_for(
        text("The postmortem, blameless."))
    assert obs.first_turn_input_tokens == input_tokens_for(requests[0].body)
    expected_usd = (obs.usage.input_tokens * 1.25 + obs.usage.output_tokens * 10.0) / 1_000_000
    assert obs.cost_usd == pytest.approx(expected_usd) and obs.cost_basis == "reported" and obs.host_cost_usd is None
    # What Codex sent: the key only as its bearer token, the Responses API, no web search, the prompt as given.
    first = requests[0]
    assert first.path == "/v1/responses" and first.headers["authorization"] == f"Bearer {KEY}"
    assert first.headers["originator"] == "codex_exec" and "0.171.0" in first.headers["user-agent"]
    assert first.body["stream"] is True and first.body["input"][-1]["content"][0]["text"] == prompt
    tools = [t.get("name") or t.get("type") for t in first.body["tools"]]
    assert "exec_command" in tools and "web_search" not in tools
    no_secret(obs)


def test_a_skill_the_prompt_names_fires_as_codex_loads_it(cli: Path, example: Library, tmp_path: Path) -> None:
    prompt = "Use $release-publisher to ship 2.0"
    with FakeOpenAI() as fake:
        fake.script(prompt, text("Shipped."))
        obs = run(make_host(example, fake, tmp_path), prompt)
        [request] = fake.requests_for(prompt)
    assert obs.error_kind is None and obs.fired() == ["release-publisher"]
    assert [(a.mechanism, a.turn) for a in obs.activations] == [("slash-command", 0)] and obs.tool_calls == []
    injected = request.body["input"][-1]["content"][0]["text"]
    assert injected.startswith("<skill>\n<name>release-publisher</name>") and "name: release-publisher" in injected


def test_a_session_that_reads_no_skill_fires_nothing(cli: Path, example: Library, tmp_path: Path) -> None:
    prompt = "What is in this folder?"
    with FakeOpenAI() as fake:
        fake.script(prompt, shell("ls -a"), text("Only the skills folder."))
        obs = run(make_host(example, fake, tmp_path), prompt)
    assert obs.error_kind is None and obs.fired() == [] and obs.activations == []
    assert [(t.name, json.loads(t.input), t.is_error) for t in obs.tool_calls] == [
        ("exec_command", {"cmd": "ls -a"}, False)]
    assert obs.final_answer == "Only the skills folder."


def test_the_commands_the_model_runs_never_see_the_key(cli: Path, example: Library, tmp_path: Path) -> None:
    prompt = "Show the environment"
    with FakeOpenAI() as fake:
        fake.script(prompt, shell("env"), text("Done."))
        obs = run(make_host(example, fake, tmp_path), prompt)
        [printed] = [i["output"] for i in fake.requests_for(prompt)[1].body["input"]
                     if i.get("type") == "function_call_output"]
    assert obs.error_kind is None and "Process exited with code 0" in printed and "PATH=" in printed
    assert KEY not in printed and codex.KEY_VARIABLE not in printed


def test_not_even_codexs_own_environment_holds_the_key(cli: Path, example: Library, tmp_path: Path) -> None:
    """A command of the same user may read its parent's environment (/proc/<codex>/environ): Codex is given a
    token for the host's key proxy (runner.hosts.keyproxy), and only the proxy holds the key, which it puts on the
    request to the API (the fake sees the key, the CLI never did)."""
    prompt = "Show the parent's environment"
    with FakeOpenAI() as fake:
        fake.script(prompt, shell("for p in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $p; done 2>/dev/null; "
                                  "echo listed"), text("Done."))
        obs = run(make_host(example, fake, tmp_path), prompt)
        requests = fake.requests_for(prompt)
        [printed] = [i["output"] for i in requests[1].body["input"] if i.get("type") == "function_call_output"]
    assert obs.error_kind is None and "listed" in printed
    assert f"{codex.KEY_VARIABLE}=skill-evals-key-proxy-" in printed  # Codex's own environment was read: a token
    assert KEY not in printed
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in requests)


def test_codexs_sandbox_failing_behind_the_wall_is_an_error(cli: Path, example: Library, tmp_path: Path) -> None:
    """Codex's own sandbox cannot start behind the Landlock wall (why the host runs commands in the wall alone there):
    forced on, every command fails before it runs, and the session is an error, never a skill that did not fire."""
    prompt = "Summarise the incident"
    with FakeOpenAI() as fake:
        fake.script(prompt, read_skill(SKILL), text("Could not read it."))
        host = make_host(example, fake, tmp_path)
        if host.session_wall is None or host.session_wall.mode != "landlock":
            pytest.skip(f"no Landlock wall on this machine ({host.session_wall}): Codex's sandbox runs")
        assert isinstance(host.cli, codex.CodexCli) and not host.cli.own_sandbox
        host.cli.own_sandbox = True
        obs = run(host, prompt)
    assert obs.error_kind == "host-crash" and "bubblewrap" in (obs.error_message or "") and obs.fired() == []


def test_failed_and_refused_reads_are_rejected_never_fired(cli: Path, example: Library, tmp_path: Path) -> None:
    """A read of a SKILL.md that is not there (exit 1), and one Codex refused to run (escalated permissions under the
    approval policy "never": no execution, nothing on stdout; its session log shows it)."""
    prompt = "Plan the migration"
    refused = function_call("exec_command", {"cmd": "cat .agents/skills/migration-planner/SKILL.md",
                                             "sandbox_permissions": "require_escalated", "justification": "need it"})
    with FakeOpenAI() as fake:
        fake.script(prompt, items(read_skill("no-such-skill"), refused), text("Could not read them."))
        obs = run(make_host(example, fake, tmp_path), prompt)
        outputs = [i["output"] for i in fake.requests_for(prompt)[1].body["input"]
                   if i.get("type") == "function_call_output"]
    assert obs.error_kind is None and obs.fired() == []
    assert sorted((a.name, a.rejected) for a in obs.activations) == [("migration-planner", True),
                                                                    ("no-such-skill", True)]
    assert all(t.is_error for t in obs.tool_calls) and len(obs.tool_calls) == 2
    assert any("Process exited with code 1" in o for o in outputs) and any("reject command" in o for o in outputs)


def test_a_500_is_an_api_error_and_a_single_one_is_retried(cli: Path, example: Library, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("always failing", error(500))
        fake.script("failing once", error(500, times=1), text("Fine now."))
        host = make_host(example, fake, tmp_path, retries=1)
        failed, recovered = run(host, "always failing"), run(host, "failing once")
        failed_requests, recovered_requests = fake.requests_for("always failing"), fake.requests_for("failing once")
    assert failed.error_kind == "api-error" and failed.final_answer is None and failed.fired() == []
    # Codex retries the request (request_max_retries) inside each retry of the turn's stream (stream_max_retries):
    # with both at 1, four requests before the error.
    assert [r.outcome for r in failed_requests] == ["error 500"] * 4
    assert failed.lost_replies == 0 and failed.usage.input_tokens == 0  # an error status is no reply begun
    assert recovered.error_kind is None and recovered.final_answer == "Fine now."
    assert recovered.usage.input_tokens == input_tokens_for(recovered_requests[-1].body)  # the 500 is not billed
    no_secret(failed)


def test_a_cut_stream_is_an_api_error_and_each_cut_reply_is_lost(cli: Path, example: Library, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("cut me off", break_stream())
        fake.script("cut me once", break_stream(times=1), text("Whole this time."))
        obs = run(make_host(example, fake, tmp_path), "cut me off")
        retried = run(make_host(example, fake, tmp_path, retries=1), "cut me once")
        outcomes = [r.outcome for r in fake.requests_for("cut me off")]
    assert obs.error_kind == "api-error" and "stream disconnected" in (obs.error_message or "")
    assert outcomes == ["break_stream"] and obs.final_answer is None and obs.lost_replies == 1
    # Codex reconnected ("Reconnecting... 1/1") and the session went on: the reply it lost may still be billed.
    assert retried.error_kind is None and retried.final_answer == "Whole this time." and retried.lost_replies == 1


def test_a_429_is_rate_limited(cli: Path, example: Library, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("too fast", error(429))
        obs = run(make_host(example, fake, tmp_path, retries=1), "too fast")
        outcomes = [r.outcome for r in fake.requests_for("too fast")]
    assert obs.error_kind == "rate-limited" and outcomes == ["error 429"]  # Codex does not retry a 429


def test_a_session_that_outlives_its_bound_times_out(cli: Path, example: Library, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        fake.script("slow model", read_skill(SKILL), hang(60))
        obs = run(make_host(example, fake, tmp_path), "slow model", timeout_s=4)
    assert obs.error_kind == "timeout" and obs.bounds_hit == ["timeout"]
    # The read before the hang is kept: it happened (the session's outcome is the timeout all the same).
    assert obs.fired() == [SKILL] and obs.final_answer is None and obs.lost_replies == 1


def test_a_session_is_ended_at_its_turn_bound(cli: Path, example: Library, tmp_path: Path) -> None:
    """`codex exec` takes no turn limit: the host ends the session once it starts a turn past max_turns, and keeps
    what the turns within the bound did."""
    prompt = "Review the dependency upgrade"
    with FakeOpenAI() as fake:
        fake.script(prompt, read_skill("dependency-upgrade-reviewer"), read_skill("migration-planner"),
                    text("Reviewed."))
        obs = run(make_host(example, fake, tmp_path), prompt, max_turns=1)
        played = [r.turn for r in fake.requests_for(prompt)]
    assert obs.bounds_hit == ["max-turns"] and obs.error_kind is None and obs.final_answer is None
    assert obs.fired() == ["dependency-upgrade-reviewer"] and [t.turn for t in obs.tool_calls] == [0]
    assert played[0] == 0 and "Reviewed." not in json.dumps(obs.transcript) and obs.lost_replies >= 1


def test_the_surface_audit_lists_the_example_library_whole(cli: Path, example: Library, tmp_path: Path) -> None:
    with FakeOpenAI() as fake:
        host = make_host(example, fake, tmp_path)
        surface = asyncio.run(host.surface(MODEL, set(example.skills), set(example.skills)))
    assert surface.error is None
    assert surface.with_description == sorted(example.skills) and surface.cut == [] and surface.name_only == []
    assert surface.missing == [] and surface.not_from_library == BUNDLED
    assert surface.listing_budget_chars == 272_000 * 2 // 100 * 4
    assert "exec_command" in surface.tools and surface.listing_chars > 0


def many_skills(root: Path, count: int) -> Library:
    """A library of `count` skills with 300-character descriptions."""
    for i in range(count):
        folder = root / ".claude" / "skills" / f"skill-{i:03d}"
        folder.mkdir(parents=True)
        description = (f"Skill number {i} handles " + "lorem ipsum dolor sit amet " * 12)[:300].strip()
        folder.joinpath("SKILL.md").write_text(f"---\nname: skill-{i:03d}\ndescription: {description}\n---\n# {i}\n")
    return load_library(root, Settings())[0]


@pytest.mark.parametrize(("count", "cut"), [(45, False), (70, True)])
def test_codex_cuts_descriptions_once_the_listing_outgrows_its_budget(cli: Path, tmp_path: Path, count: int,
                                                                     cut: bool) -> None:
    """Codex's budget (2% of the model's context window, 4 bytes a token) holds the listing's entries, its own
    bundled skills' too: 45 entries of ~345 characters fit 21,760, 70 do not, and then every description is cut
    alike (openai/codex#24299)."""
    library = many_skills(tmp_path / "library", count)
    with FakeOpenAI() as fake:
        host = make_host(library, fake, tmp_path)
        surface = asyncio.run(host.surface(MODEL, set(library.skills), set(library.skills)))
    assert surface.error is None and surface.missing == [] and surface.name_only == []
    assert surface.with_description == sorted(library.skills)
    assert surface.cut == (sorted(library.skills) if cut else [])
    assert surface.listing_budget_chars == 21_760


def test_the_surface_audit_of_aegis_lists_every_skill_each_description_cut(cli: Path, tmp_path: Path) -> None:
    """Project Aegis's 185 skills overflow the budget: all are listed, every description shortened. Its manual-only
    skills (Claude Code's `disable-model-invocation`) are listed too: Codex does not read that field."""
    aegis = load_library(AEGIS_SKILLS, Settings())[0]
    invocable = {name for name, skill in aegis.skills.items() if not skill.manual_only}
    with FakeOpenAI() as fake:
        host = make_host(aegis, fake, tmp_path)
        surface = asyncio.run(host.surface(MODEL, set(aegis.skills), invocable))
    assert surface.error is None and len(aegis.skills) == 185 and len(invocable) < len(aegis.skills)
    assert surface.with_description == sorted(aegis.skills) and surface.cut == sorted(aegis.skills)
    assert surface.missing == [] and surface.name_only == [] and surface.not_from_library == BUNDLED
