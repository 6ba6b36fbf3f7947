"""benchmarks/skill_creator_eval.py decides a query as skill-creator's run_eval.py does, from the CLI's stream-json
lines: the first tool call decides (Skill or Read naming the temporary command: triggered; any other tool: not),
a turn without a tool call is not triggered, and the whole `assistant` message decides when no stream event did."""

from __future__ import annotations

from typing import Any

import pytest

from benchmarks.skill_creator_eval import Watch, command_text, frontmatter, verdicts

COMMAND = "invoice-scanner-skill-0a1b2c3d"


def stream(*events: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"type": "stream_event", "event": e} for e in events]


def tool_start(name: str) -> dict[str, Any]:
    return {"type": "content_block_start", "content_block": {"type": "tool_use", "name": name}}


def json_delta(text: str) -> dict[str, Any]:
    return {"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": text}}


TEXT = ({"type": "content_block_start", "content_block": {"type": "text"}},
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Here"}}, {"type": "content_block_stop"})


def decide(lines: list[dict[str, Any]]) -> tuple[bool | None, int]:
    """What Watch decides, and after how many lines (the CLI is killed there)."""
    watch = Watch(COMMAND)
    for count, line in enumerate(lines, 1):
        found = watch.line(line)
        if found is not None:
            return found, count
    return None, len(lines)


@pytest.mark.parametrize(("lines", "expected"), [
    # The command named in the Skill call's input, split across deltas: decided at the delta that completes it.
    (stream(tool_start("Skill"), json_delta('{"skill": "invoice-scanner'), json_delta('-skill-0a1b2c3d"}'),
            {"type": "content_block_stop"}), (True, 3)),
    # The installed skill of the same name: not the command, decided at the block's end.
    (stream(tool_start("Skill"), json_delta('{"skill": "invoice-scanner"}'), {"type": "content_block_stop"}),
     (False, 3)),
    # Read of the command's file counts too.
    (stream(tool_start("Read"), json_delta(f'{{"file_path": ".claude/commands/{COMMAND}.md"}}')), (True, 2)),
    # Any other tool first: not triggered at once.
    (stream(tool_start("Bash"), json_delta(f'{{"command": "cat {COMMAND}"}}')), (False, 1)),
    # A text answer: the text block's end decides nothing, the message's end does.
    (stream(*TEXT, {"type": "message_delta"}, {"type": "message_stop"}), (False, 5)),
    # No stream events: the first assistant message with a tool call decides; a result ends it.
    ([{"type": "assistant", "message": {"content": [{"type": "text", "text": "Reading."}]}},
      {"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Skill", "input": {"skill": COMMAND}}]}}],
     (True, 2)),
    ([{"type": "assistant", "message": {"content": [{"type": "tool_use", "name": "Grep", "input": {}}]}}], (False, 1)),
    ([{"type": "system", "subtype": "init"}, {"type": "result", "subtype": "success"}], (False, 2)),
])
def test_the_first_tool_call_decides(lines: list[dict[str, Any]], expected: tuple[bool, int]) -> None:
    assert decide(lines) == expected


def test_the_command_file_lists_the_description_and_the_verdicts_use_the_threshold(tmp_path) -> None:
    skill = tmp_path / "invoice-scanner"
    skill.mkdir()
    (skill / "SKILL.md").write_text("---\nname: invoice-scanner\ndescription: >\n  Reads invoices\n  and bills.\n---\n")
    name, description = frontmatter(skill)
    assert (name, description) == ("invoice-scanner", "Reads invoices and bills.")
    assert command_text(name, description).startswith("---\ndescription: |\n  Reads invoices and bills.\n---\n")
    found = verdicts([{"query": "a", "should_trigger": True}, {"query": "b", "should_trigger": False}],
                     {"a": [True, False, False], "b": [True, True, False]}, 0.5)
    # 1/3 < 0.5: the should query fails; 2/3 >= 0.5: the should-not query fails too.
    assert [(r["query"], r["trigger_rate"], r["pass"]) for r in found] == [("a", 1 / 3, False), ("b", 2 / 3, False)]
