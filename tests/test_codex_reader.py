"""The codex host's reading of what Codex CLI 0.171.0 printed and logged (recorded from real sessions against the fake
Responses API: tests/data/codex, written by the CLI itself; the session logs keep only the entries the reader reads and
leave out the prompts), its reading of shell commands, and its reading of a captured first request. The real CLI:
tests/test_host_codex.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from runner.core.host_traits import traits
from runner.hosts.codex import (
    CodexReader,
    config_overrides,
    error_kind_of,
    files_read,
    listing_budget,
    parse_listing,
    skills_read,
    surface_of,
)

DATA = Path(__file__).parent / "data" / "codex"


def read(name: str, codex_home: Path | None) -> CodexReader:
    """A reader fed a recorded session's stdout; with its session log under `codex_home` when that is given."""
    if codex_home is not None:
        folder = codex_home / "sessions" / "2026" / "12" / "07"
        folder.mkdir(parents=True)
        shutil.copy(DATA / f"{name}.rollout.jsonl", folder / "rollout-2026-12-07T09-38-00-recorded.jsonl")
    reader = CodexReader(codex_home)
    for line in (DATA / f"{name}.stdout.jsonl").read_text(encoding="utf-8").splitlines():
        reader.line(line)
    return reader


def test_the_codex_host_reads_skills_from_agents_skills_with_a_file_read_grade() -> None:
    codex = traits("codex")
    assert codex.activation_grade == "file-read" and codex.activation.skills_folder == ".agents/skills"
    assert codex.activation.read_tool == "exec_command" and not codex.runs_claude_code


@pytest.mark.parametrize(("command", "skills"), [
    ("/bin/bash -lc 'cat .agents/skills/pdf/SKILL.md'", ["pdf"]),
    ("sed -n '1,200p' /work/project/.agents/skills/pdf/SKILL.md", ["pdf"]),
    ("cd .agents/skills/pdf && head -n 80 SKILL.md", ["pdf"]),
    ("cat < .agents/skills/pdf/SKILL.md", ["pdf"]),
    ("LC_ALL=C cat .agents/skills/a/SKILL.md; nl -ba .agents/skills/b/SKILL.md | tail -5", ["a", "b"]),
    ("cat .agents/skills/pdf/SKILL.md 2>/dev/null", ["pdf"]),
    # Not reads of a skill for the model: a search, a listing, a count, output sent to a file, another folder.
    ("rg -n 'usage' .agents/skills/pdf/SKILL.md", []),
    ("ls .agents/skills/*/SKILL.md", []),
    ("wc -l < .agents/skills/pdf/SKILL.md", []),
    ("cat .agents/skills/pdf/SKILL.md > notes.md", []),
    ("cat .claude/skills/pdf/SKILL.md", []),
    ("cat .agents/skills/pdf/README.md", []),
    ("cat 'unbalanced", []),
])
def test_a_shell_command_reads_the_skills_whose_skill_md_it_prints(command: str, skills: list[str]) -> None:
    assert skills_read(command) == skills


def test_files_read_joins_a_cd_and_skips_options() -> None:
    assert files_read("cd docs && cat -n a.md b.md") == ["docs/a.md", "docs/b.md"]


def test_a_session_with_reads_that_worked_failed_and_were_refused(tmp_path: Path) -> None:
    """Turn 0 asked for three reads at once: demo-skill (read), missing-skill (exit 1), other-skill with escalated
    permissions (Codex refused it: no execution, nothing on stdout); turn 1 read other-skill by its absolute path;
    turn 2 answered."""
    outcome = read("reads", tmp_path / ".codex").outcome()
    assert [(a.name, a.turn, a.rejected, a.mechanism) for a in outcome.activations] == [
        ("demo-skill", 0, False, "skill-md-read"), ("missing-skill", 0, True, "skill-md-read"),
        ("other-skill", 0, True, "skill-md-read"), ("other-skill", 1, False, "skill-md-read")]
    assert [(t.name, json.loads(t.input)["cmd"].split()[0], t.turn, t.is_error) for t in outcome.tool_calls] == [
        ("exec_command", "cat", 0, False), ("exec_command", "cat", 0, True), ("exec_command", "cat", 0, True),
        ("exec_command", "sed", 1, False)]
    assert outcome.final_answer == "DEMO-SKILL summary" and outcome.ended and outcome.error_kind is None
    # Codex's own figures: turn.completed's sum, and each response's in the log (model calls, the first's input).
    printed = json.loads((DATA / "reads.stdout.jsonl").read_text().splitlines()[-1])["usage"]
    assert outcome.usage.input_tokens == printed["input_tokens"] - printed["cached_input_tokens"]
    assert outcome.usage.output_tokens == printed["output_tokens"]
    logged = [json.loads(line)["payload"]["usage"] for line in (DATA / "reads.rollout.jsonl").read_text().splitlines()
              if json.loads(line)["type"] == "token_usage_record"]
    assert outcome.model_calls == outcome.turns == len(logged) == 3
    assert outcome.first_turn_input_tokens == logged[0]["input_tokens"]
    assert sum(u["input_tokens"] for u in logged) == printed["input_tokens"]


def test_without_a_session_log_stdout_alone_gives_the_executed_reads(tmp_path: Path) -> None:
    """The refused read printed nothing, so it is not seen; turns are estimated one per finished command."""
    outcome = read("reads", None).outcome()
    assert [(a.name, a.rejected) for a in outcome.activations] == [("missing-skill", True), ("demo-skill", False),
                                                                   ("other-skill", False)]
    assert [a.turn for a in outcome.activations] == [0, 1, 2]
    assert outcome.first_turn_input_tokens is None and outcome.final_answer == "DEMO-SKILL summary"


@pytest.mark.parametrize(("name", "kind", "said"), [
    ("error-500", "api-error", "high demand"),
    ("cut-stream", "api-error", "stream disconnected before completion"),
    ("rate-limited", "rate-limited", "429 Too Many Requests"),
])
def test_a_failed_turn_is_the_sessions_error(tmp_path: Path, name: str, kind: str, said: str) -> None:
    outcome = read(name, tmp_path / ".codex").outcome()
    assert outcome.error_kind == kind and said in (outcome.error_message or "")
    assert outcome.ended and outcome.final_answer is None and outcome.activations == []
    assert outcome.model_calls == 0 and outcome.usage.input_tokens == 0


def test_a_skill_the_prompt_names_is_loaded_by_codex_itself(tmp_path: Path) -> None:
    """`$demo-skill` in the prompt: Codex put the SKILL.md into the request (its log shows the message); no read."""
    outcome = read("mention", tmp_path / ".codex").outcome()
    assert [(a.name, a.mechanism, a.turn, a.rejected) for a in outcome.activations] == [
        ("demo-skill", "slash-command", 0, False)]
    assert outcome.tool_calls == [] and outcome.final_answer == "DEMO-SKILL summary"


def test_a_sandbox_that_cannot_run_commands_is_a_host_error_not_a_verdict(tmp_path: Path) -> None:
    """Recorded with Codex's own sandbox behind the Landlock wall: every command failed before it ran ("error
    building bubblewrap command"), so the skill the model asked for could not be read; the session is an error."""
    outcome = read("sandbox-failure", tmp_path / ".codex").outcome()
    assert outcome.error_kind == "host-crash" and "error building bubblewrap command" in (outcome.error_message or "")
    assert [(a.name, a.rejected) for a in outcome.activations] == [("demo-skill", True)]


@pytest.mark.parametrize(("name", "lost"), [("error-500", 0), ("cut-stream", 1), ("rate-limited", 0)])
def test_a_reply_begun_and_lost_is_counted(tmp_path: Path, name: str, lost: int) -> None:
    """A cut stream's reply may be billed; an HTTP error status is no reply."""
    assert read(name, tmp_path / ".codex").outcome().lost_replies == lost


def test_the_turn_bound_is_passed_once_the_log_shows_a_turn_past_it(tmp_path: Path) -> None:
    """The recorded session's log holds three responses, the first two with calls: with max_turns 1 the reader,
    still before turn.completed, says the bound was passed, and what turns 1 and 2 did is not the session's."""
    codex_home = tmp_path / ".codex"
    reader = read("reads", codex_home)
    folder = codex_home / "sessions" / "2026" / "12" / "07"
    bounded = CodexReader(codex_home, max_turns=1)
    for line in (DATA / "reads.stdout.jsonl").read_text(encoding="utf-8").splitlines()[:-1]:  # not turn.completed
        bounded.line(line)
    assert bounded.over() == "max-turns"
    outcome = bounded.outcome()
    assert [(a.name, a.turn) for a in outcome.activations] == [("demo-skill", 0), ("missing-skill", 0),
                                                              ("other-skill", 0)]
    assert {t.turn for t in outcome.tool_calls} == {0}
    # Within the bound, or once the session ended as Codex ends one, nothing is passed.
    assert CodexReader(codex_home, max_turns=3).over() is None and reader.over() is None
    ended = CodexReader(codex_home, max_turns=1)
    for line in (DATA / "reads.stdout.jsonl").read_text(encoding="utf-8").splitlines():
        ended.line(line)
    assert ended.over() is None and ended.outcome().final_answer == "DEMO-SKILL summary"
    assert len(list(folder.iterdir())) == 1


def test_error_kinds_from_codexs_messages() -> None:
    assert error_kind_of("Quota exceeded. Check your plan and billing details.") == "spend-limit"
    assert error_kind_of("rate limit exceeded: Rate limit reached. Please try again in 1.5s.") == "rate-limited"
    assert error_kind_of("Codex ran out of room in the model's context window.") == "api-error"
    assert error_kind_of("unexpected status 401 Unauthorized: ..., request id: req_429") == "api-error"


def test_a_retry_notice_is_not_an_error_and_a_session_cut_off_has_not_ended() -> None:
    reader = CodexReader(None)
    for event in ({"type": "turn.started"},
                  {"type": "error", "message": "Reconnecting... 1/5 (stream disconnected before completion)"},
                  {"type": "item.completed", "item": {"id": "item_0", "type": "error", "message": "Model metadata "
                                                      "for `x` not found. Defaulting to fallback metadata"}},
                  {"type": "item.started", "item": {"id": "item_1", "type": "command_execution", "status":
                                                    "in_progress", "command": "/bin/bash -lc 'cat "
                                                    ".agents/skills/pdf/SKILL.md'", "exit_code": None}}):
        reader.line(json.dumps(event))
    reader.line("not json at all")
    outcome = reader.outcome()
    assert outcome.error_kind is None and not outcome.ended  # the base calls it a timeout, a crash or ambiguous
    assert [(a.name, a.rejected) for a in outcome.activations] == [("pdf", True)]  # never finished: loaded nothing
    assert outcome.transcript[-1] == {"type": "non-json", "text": "not json at all"}


def test_an_error_codex_printed_before_it_ended_without_a_failed_turn_is_the_sessions() -> None:
    reader = CodexReader(None)
    for event in ({"type": "turn.started"}, {"type": "error", "message": "exceeded retry limit, last status: 429 Too "
                                                                        "Many Requests, request id: req_1"}):
        reader.line(json.dumps(event))
    outcome = reader.outcome()
    assert (outcome.error_kind, outcome.ended, outcome.lost_replies) == ("rate-limited", False, 0)


def test_the_session_is_pointed_at_the_endpoint_by_overrides_alone() -> None:
    words = config_overrides("http://127.0.0.1:9/v1", 0)
    pairs = dict(w.split("=", 1) for w in words[1::2])
    assert words[::2] == ["-c"] * len(pairs)
    assert pairs["model_providers.skill_evals.base_url"] == '"http://127.0.0.1:9/v1"'
    assert pairs["model_providers.skill_evals.wire_api"] == '"responses"'
    assert pairs["analytics.enabled"] == "false" and pairs["web_search"] == '"disabled"'
    assert pairs["shell_environment_policy.inherit"] == '"core"'
    assert pairs["model_providers.skill_evals.request_max_retries"] == "0"
    assert "model_providers.skill_evals.request_max_retries" not in dict(
        w.split("=", 1) for w in config_overrides("http://x/v1", None)[1::2])


LISTING = """<skills_instructions>
## Skills
A skill is a set of local instructions to follow that is stored in a `SKILL.md` file. Below is the list ...
### Skill roots
- `r0` = `/s/home/.codex/skills/.system`
- `r1` = `/s/home/project/.agents/skills`
### Available skills
- imagegen: Generate or edit raster images. (file: r0/imagegen/SKILL.md)
- long-one: First part of a long descripti (file: r1/long-one/SKILL.md)
- other-name: Listed under its frontmatter name (file: r1/named/SKILL.md)
- quoted: Has (file: fake) inside and a: colon (file: r1/quoted/SKILL.md)
- bare: (file: r1/bare/SKILL.md)
### How to use skills
- Discovery: The list above is the skills available in this session (name + description + short path).
</skills_instructions>"""


def test_the_listing_is_read_entry_by_entry_with_its_roots_expanded() -> None:
    listed = parse_listing(LISTING)
    assert [(s.name, s.description, s.root) for s in listed] == [
        ("imagegen", "Generate or edit raster images.", "/s/home/.codex/skills/.system"),
        ("long-one", "First part of a long descripti", "/s/home/project/.agents/skills"),
        ("named", "Listed under its frontmatter name", "/s/home/project/.agents/skills"),
        ("quoted", "Has (file: fake) inside and a: colon", "/s/home/project/.agents/skills"),
        ("bare", "", "/s/home/project/.agents/skills")]


def test_the_surface_tells_whole_cut_bare_missing_and_bundled() -> None:
    body = {"model": "gpt-5.5", "tools": [{"type": "function", "name": "exec_command"}, {"type": "web_search"}],
            "input": [{"type": "message", "role": "developer",
                       "content": [{"type": "input_text", "text": LISTING}]}]}
    library = {"long-one", "named", "quoted", "bare", "absent", "imagegen-not"}
    descriptions = {"long-one": "First part of a long description\nthat goes on.", "named": "Listed under its "
                    "frontmatter   name", "quoted": "Has (file: fake) inside and a: colon", "bare": "Bare."}
    surface = surface_of(body, library, library - {"imagegen-not"}, descriptions, listing_budget(272_000))
    assert surface.with_description == ["long-one", "named", "quoted"] and surface.cut == ["long-one"]
    assert surface.name_only == ["bare"] and surface.missing == ["absent"]
    assert surface.not_from_library == ["imagegen"] and surface.tools == ["exec_command", "web_search"]
    assert surface.listing_budget_chars == 21_760 and surface.listing_chars == len(LISTING)
    assert listing_budget(None) == 8_000
    assert surface_of({"input": []}, library, {"bare"}, {}, None).error == "the captured request holds no skill listing"
