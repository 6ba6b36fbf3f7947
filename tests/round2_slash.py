"""Synthetic libraries for issue 29, items 1-3 (slash prompts, explicit invocations, manual-only skills).

Written for these tests (no third-party text); the shapes follow what public libraries do: skill-creator
evals/evals.json whose prompts start with `/<skill>`, ids named `negative-*` for cases that invoke the skill and
expect it to decline, and `disable-model-invocation: true` skills whose evals invoke them by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.compat_libraries import git_init, write_json

NOTES = "notes-digest"          # an ordinary skill
MANUAL = "release-cutter"       # disable-model-invocation: true (invoked by hand only)
HIDDEN = "style-rules"          # user-invocable: false (the model may load it, a user may not)
ARGS = "ticket-filer"           # a body with $ARGUMENTS placeholders


def _skill(root: Path, name: str, extra: str = "", body: str | None = None) -> Path:
    folder = root / ".claude" / "skills" / name
    folder.mkdir(parents=True, exist_ok=True)
    text = body if body is not None else f"# {name}\n\nFollow the {name.replace('-', ' ')} steps of this test library.\n"
    (folder / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: Use for {name.replace('-', ' ')} work in this test library.\n{extra}---\n"
        f"{text}", encoding="utf-8")
    return folder


def _evals(folder: Path, evals: list[dict]) -> None:
    write_json(folder / "evals" / "evals.json", {"skill_name": folder.name, "evals": evals})


def slash_forms(root: Path) -> Path:
    """Item 1: every slash form Claude Code accepts, on an ordinary skill, an argument-taking one, a manual-only
    one and one users cannot invoke."""
    git_init(root)
    _evals(_skill(root, NOTES), [
        {"id": "bare", "prompt": f"/{NOTES}", "expectations": ["Gives a digest."]},
        {"id": "with-args", "prompt": f"/{NOTES} summarise the meeting notes", "expectations": ["Gives a digest."]},
        {"id": "own-line", "prompt": f"/{NOTES}\nThe notes are below.\n- item one\n- item two",
         "expectations": ["Gives a digest of both items."]},
        {"id": "args-then-lines", "prompt": f"/{NOTES} short\nThe notes are below.",
         "expectations": ["Gives a short digest."]},
        {"id": "not-a-skill", "prompt": "/digest-everything in the notes folder",
         "expectations": ["Answers the request."]},
    ])
    _evals(_skill(root, ARGS, body="# ticket filer\n\nFile a ticket titled $0 for $ARGUMENTS.\n"), [
        {"id": "placeholders", "prompt": f'/{ARGS} "login bug" urgent', "expectations": ["Files one ticket."]}])
    _evals(_skill(root, MANUAL, "disable-model-invocation: true\n"), [
        {"id": "by-hand", "prompt": f"/{MANUAL} 3.0.0", "expectations": ["Names the version 3.0.0."]}])
    _evals(_skill(root, HIDDEN, "user-invocable: false\n"), [
        {"id": "model-loads", "prompt": "Check this paragraph against the house style: Our Product is GREAT.",
         "expectations": ["Points out the capitals."]}])
    return root


def explicit_invocation(root: Path) -> Path:
    """Item 2: cases whose prompt invokes their skill by name test what it does once invoked, whatever their id;
    an explicit `should_trigger: false` still decides."""
    git_init(root)
    _evals(_skill(root, NOTES), [
        {"id": "negative-refuses-binary", "prompt": f"/{NOTES} digest this binary file: 0x7f454c46",
         "expected_output": "Declines: the file is not notes.",
         "expectations": ["Says the input is not notes and asks for text."]},
        {"id": "negative-unrelated", "prompt": "Book me a table for two tonight.",
         "expectations": ["Does not produce a digest."]},
        {"id": "redirects", "prompt": f"/{NOTES} file a ticket for the login bug",
         "expectations": [f"Points the user to /{ARGS} for tickets."]},
        {"id": "written-false", "prompt": f"/{NOTES} the notes", "should_trigger": False,
         "expectations": ["Gives a digest."]},
    ])
    _evals(_skill(root, ARGS), [{"id": "files-one", "prompt": f"/{ARGS} the login page times out",
                                  "expectations": ["Files one ticket about the login page."]}])
    return root


def manual_only_by_hand(root: Path) -> Path:
    """Item 3: a manual-only skill's explicit invocations run; a case that needs the model to pick it stays UNRUN."""
    git_init(root)
    _evals(_skill(root, MANUAL, "disable-model-invocation: true\n"), [
        {"id": "by-hand", "prompt": f"/{MANUAL} 2.4.0", "expectations": ["Names the version 2.4.0."]},
        {"id": "picked-by-model", "prompt": "Cut the 2.4.0 release for me.", "expectations": ["Names 2.4.0."]},
    ])
    _evals(_skill(root, NOTES), [{"id": "digest", "prompt": "Digest these notes: ship on Friday; Ana owns QA.",
                                  "expectations": ["Mentions Friday."]}])
    return root


LIBRARIES: dict[str, Callable[[Path], Path]] = {
    "slash-forms": slash_forms,
    "explicit-invocation": explicit_invocation,
    "manual-only-by-hand": manual_only_by_hand,
}
