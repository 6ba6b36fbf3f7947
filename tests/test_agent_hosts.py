"""The same cases on every agent that loads skills: `run --host` over Claude Code and the four agent CLIs, each the
real program against the fake of the API it speaks (Messages for claude-code, opencode and copilot; the Gemini API;
the OpenAI Responses API), and each CLI's surface audit of Project Aegis at $0."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from runner.core.host_traits import HOST_TRAITS
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.prices import load as load_prices
from runner.hosts.registry import HostInputs, make_host
from runner.testing import fake_anthropic as fa
from runner.testing import fake_gemini as fg
from runner.testing import fake_openai as fo
from tests.agent_clis import require_cli
from tests.conftest import AEGIS_SKILLS, run_cli

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "library"
AGENT_HOSTS = ("opencode", "copilot", "gemini", "codex")
HOSTS = ("claude-code", *AGENT_HOSTS)
# Three discrimination cases of migration-planner: decided by which skills fired alone (no judge).
CASES = ("migration-planner/trigger/migration-wins-here", "migration-planner/trigger/orm-bump-goes-to-dependency-upgrade-"
         "reviewer", "migration-planner/trigger/migration-outage-goes-to-postmortem")
DIFFERS = CASES[0]
PROMPT = "Change orders.id from integer to bigint"  # DIFFERS's prompt: every host but gemini is scripted to load it
SETTINGS = """
[run]
concurrency = 2
host_models = { gemini = "gemini-2.5-flash", codex = "gpt-5-codex" }

[prices."gemini-2.5-flash"]
input = 0.3
output = 2.5

[prices."gpt-5-codex"]
input = 1.25
output = 10.0
"""


def load_migration_planner(body: dict[str, Any]) -> fa.Text | fa.ToolUse:
    """The Messages fake's turn for DIFFERS on whichever host sent it: the skill called with that host's own tool
    (Claude Code's `Skill`, OpenCode's `skill {name}`, Copilot's `skill {skill}`), then an answer."""
    if any(m.get("role") == "assistant" for m in body.get("messages") or [] if isinstance(m, dict)):
        return fa.text("Expand, backfill, contract.")
    tools = {t.get("name"): t for t in body.get("tools") or [] if isinstance(t, dict)}
    if "Skill" in tools:
        return fa.tool("Skill", {"skill": "migration-planner"})
    fields = (tools.get("skill") or {}).get("input_schema", {}).get("properties", {})
    return fa.tool("skill", {"name" if "name" in fields else "skill": "migration-planner"})


@pytest.fixture(scope="module")
def compared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for host in AGENT_HOSTS:
        require_cli(host)
    root = tmp_path_factory.mktemp("agents")
    library = root / "library"
    shutil.copytree(EXAMPLE, library)
    (library / ".skill-evals.toml").write_text(SETTINGS, encoding="utf-8")
    out = root / "out"
    with fa.FakeAnthropic() as anthropic, fg.FakeGemini() as gemini, fo.FakeOpenAI() as openai:
        anthropic.script(PROMPT, fa.dynamic(load_migration_planner), fa.dynamic(load_migration_planner))
        gemini.default(fg.text("No skill is needed for this."))
        openai.script(PROMPT, fo.read_skill("migration-planner"), fo.text("Expand, backfill, contract."))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "GEMINI_", "GOOGLE_", "OPENAI_"))}
        env.update(CI="true", ANTHROPIC_API_KEY="sk-ant-test-agents", ANTHROPIC_BASE_URL=anthropic.url,
                   GEMINI_API_KEY="gemini-test-agents", GOOGLE_GEMINI_BASE_URL=gemini.url,
                   OPENAI_API_KEY="sk-openai-test-agents", OPENAI_BASE_URL=openai.url + "/v1")
        done = run_cli("run", "--library", str(library), "--host", ",".join(HOSTS), "--out", str(out),
                       "--repeats", "1", "--quorum", "1", "--max-usd", "1000",
                       *[arg for uid in CASES for arg in ("--case", uid)], env=env, timeout=900)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        # Each key went to its own API only.
        assert all(r.headers.get("x-api-key") == "sk-ant-test-agents" for r in anthropic.requests)
        assert gemini.requests and all(r.headers.get("x-goog-api-key") == "gemini-test-agents"
                                       for r in gemini.requests)
        assert openai.requests and all(r.headers.get("authorization") == "Bearer sk-openai-test-agents"
                                       for r in openai.requests)
    return out


def test_one_results_json_compares_every_host_with_its_grade(compared: Path) -> None:
    results = json.loads((compared / "results.json").read_text(encoding="utf-8"))
    hosts = results["hosts"]
    runs = {run["name"]: run for run in hosts["hosts"]}
    assert list(runs) == list(HOSTS)
    assert {name: run["activation_grade"] for name, run in runs.items()} == {
        name: HOST_TRAITS[name].activation_grade for name in HOSTS}
    assert runs["codex"]["activation_grade"] == "file-read"
    assert all(run["versions"] for run in runs.values())
    # The host x skill table: migration-planner's discrimination cases are no trigger/no_trigger cases, so the
    # table is about their targets; every host has a row entry for every skill it measured.
    for row in hosts["skills"]:
        assert {cell["host"] for cell in row["hosts"]} == set(HOSTS)
    # The one case scripted to differ: loaded everywhere but on gemini.
    differences = {d["uid"]: d["states"] for d in hosts["differences"]}
    assert differences == {DIFFERS: {"claude-code": "PASS", "opencode": "PASS", "copilot": "PASS", "gemini": "FAIL",
                                     "codex": "PASS"}}


def test_every_attempt_records_its_hosts_grade_and_version(compared: Path) -> None:
    for host in HOSTS:
        folder = compared / "hosts" / host
        records = [json.loads(line) for line in (folder / "attempts.jsonl").read_text(encoding="utf-8").splitlines()
                   if line.strip()]
        assert {r["uid"] for r in records} == set(CASES), host
        assert {r["activation_grade"] for r in records} == {HOST_TRAITS[host].activation_grade}, host
        plan = json.loads((folder / "plan.json").read_text(encoding="utf-8"))
        assert plan["host"] == host and plan["versions"], host
        case = next(c for c in json.loads((folder / "results.json").read_text(encoding="utf-8"))["cases"]
                    if c["uid"] == DIFFERS)
        assert case["activation_grade"] == HOST_TRAITS[host].activation_grade


def test_the_comparison_report_labels_the_file_read_host(compared: Path) -> None:
    done = run_cli("report", str(compared), "--format", "markdown")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert "- codex 0.171.0, grade file-read" in text
    assert (f"{DIFFERS} (migration-planner): claude-code PASS · opencode PASS · copilot PASS · gemini FAIL · "
            "codex PASS (file-read)") in text


@pytest.mark.parametrize(("host", "described", "named", "missing"), [
    ("opencode", 185, 0, []),
    ("copilot", 14, 152, ["_template"]),
    ("gemini", 185, 0, []),
])
def test_each_cli_lists_aegis_as_measured_at_no_cost(host: str, described: int, named: int, missing: list[str],
                                                     tmp_path: Path) -> None:
    """The surface audit reads each CLI's own first request (a capture endpoint, no key, no model): Project Aegis's
    185 skills as that CLI lists them (Codex's: tests/test_host_codex.py)."""
    require_cli(host)
    aegis = load_library(AEGIS_SKILLS, Settings())[0]
    invocable = {name for name, skill in aegis.skills.items() if not skill.manual_only}
    settings = Settings()
    made = make_host(host, HostInputs(library=aegis, settings=settings, prices=load_prices(settings),
                                      api_key="", base_url=None, run_folder=None))
    surface = asyncio.run(made.surface("claude-sonnet-4-6", set(aegis.skills), invocable))
    assert surface.error is None, surface.error
    assert (len(surface.with_description), len(surface.name_only), surface.missing) == (described, named, missing)
    assert set(surface.with_description) | set(surface.name_only) <= set(aegis.skills)
    assert not set(surface.not_from_library) & set(aegis.skills)
