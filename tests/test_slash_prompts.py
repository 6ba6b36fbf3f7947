"""Slash prompts (issue 29, items 1-3): one parse of `/name args` for every host, the classifier and the plan.

Before: the api host looked up the whole first line after `/` as the skill name (`/notes-digest summarise the
notes` expanded nothing, so the case was PASS on Claude Code and FAIL on the api host), sent `<command-args>` for a
bare `/name`, put later lines in the arguments but not the rest of the first line, and sent a `user-invocable:
false` skill's command to the model; a case invoking its skill by hand became no_trigger because its id started
with `negative-`; an explicit invocation of a manual-only skill was held back as manual-only-target.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from runner.corpus import slash
from runner.corpus.library import Library, load_library
from runner.corpus.settings import Settings
from runner.execute.hosts.api import ApiHost
from runner.execute.hosts.base import Observation, SessionSpec
from runner.execute.hosts.claude_code import ClaudeCodeHost
from runner.execute.hosts.workspace import LibraryFiles
from runner.plan.prices import load as load_prices
from runner.testing.fake_anthropic import FakeAnthropic, text
from tests import round2_slash as r2

KEY = "sk-test-slash-prompts-29"
MODEL = "claude-sonnet-4-6"
NOTES_BODY = f"# {r2.NOTES}\n\nFollow the notes digest steps of this test library.\n"


def command(name: str, args: str = "") -> str:
    return (f"<command-message>{name}</command-message>\n<command-name>/{name}</command-name>\n"
            + (f"<command-args>{args}</command-args>\n" if args else ""))


def base(name: str, body: str) -> str:
    return f"Base directory for this skill: .claude/skills/{name}\n\n{body}"


def blocks(*texts: str) -> list[dict[str, str]]:
    return [{"type": "text", "text": t} for t in texts]


# What Claude Code (CLI 2.1.332) sent as the first user message for each form, measured against the fake (the CLI's
# own system-reminder blocks and cache marks left out, its absolute session folder shown relative).
FORMS: dict[str, tuple[str, list[dict[str, str]], list[str]]] = {
    "bare": (f"/{r2.NOTES}", blocks(command(r2.NOTES), base(r2.NOTES, NOTES_BODY)), [r2.NOTES]),
    "args": (f"/{r2.NOTES} summarise the meeting notes",
             blocks(command(r2.NOTES, "summarise the meeting notes"),
                    base(r2.NOTES, NOTES_BODY + "\n\nARGUMENTS: summarise the meeting notes")), [r2.NOTES]),
    "own-line": (f"/{r2.NOTES}\nThe notes are below.\n- item one",
                 blocks(command(r2.NOTES, "The notes are below.\n- item one"),
                        base(r2.NOTES, NOTES_BODY + "\n\nARGUMENTS: The notes are below.\n- item one")), [r2.NOTES]),
    "args-then-lines": (f"/{r2.NOTES}  short \nThe notes are below.\n",
                        blocks(command(r2.NOTES, "short \nThe notes are below."),
                               base(r2.NOTES, NOTES_BODY + "\n\nARGUMENTS: short \nThe notes are below.")), [r2.NOTES]),
    "not-a-skill": ("/digest-everything in the notes folder", blocks("/digest-everything in the notes folder"), []),
    "manual-only": (f"/{r2.MANUAL} 2.4.0",
                    blocks(command(r2.MANUAL, "2.4.0"),
                           base(r2.MANUAL, "# release-cutter\n\nFollow the release cutter steps of this test "
                                           "library.\n\n\nARGUMENTS: 2.4.0")), [r2.MANUAL]),
    "placeholders": (f'/{r2.ARGS} "login bug" urgent',
                     blocks(command(r2.ARGS, '"login bug" urgent'),
                            base(r2.ARGS, '# ticket filer\n\nFile a ticket titled login bug for "login bug" urgent.\n')),
                     [r2.ARGS]),
}
REFUSED = (f"/{r2.HIDDEN} go", 'This skill can only be invoked by Claude, not directly by users. Ask Claude to use '
                              f'the "{r2.HIDDEN}" skill for you.')


@pytest.fixture(scope="module")
def forms_library(tmp_path_factory: pytest.TempPathFactory) -> Library:
    library, _ = load_library(r2.slash_forms(tmp_path_factory.mktemp("slash-forms")), Settings())
    return library


def spec(prompt: str) -> SessionSpec:
    return SessionSpec(attempt_id="s/evals/x#main#1", uid="s/evals/x", prompt=prompt, model=MODEL, max_turns=3,
                       timeout_s=60, max_output_tokens=256)


def run_api(library: Library, fake: FakeAnthropic, prompt: str) -> Observation:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    host = ApiHost(library, files, load_prices(Settings()), KEY, fake.url, None)

    async def main() -> Observation:
        try:
            return await host.run(spec(prompt))
        finally:
            await host.aclose()
    return asyncio.run(main())


def run_claude_code(library: Library, fake: FakeAnthropic, prompt: str, work: Path) -> Observation:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    host = ClaudeCodeHost(files, load_prices(Settings()), KEY, fake.url, None, ["Skill", "Read", "Glob", "Grep"],
                          work_parent=work)

    async def main() -> Observation:
        try:
            return await host.run(spec(prompt))
        finally:
            await host.aclose()
    return asyncio.run(main())


def acts(obs: Observation) -> list[tuple[str, str, int, bool]]:
    return [(a.name, a.mechanism, a.turn, a.rejected) for a in obs.activations]


def first_user_blocks(body: dict[str, Any]) -> list[dict[str, str]]:
    """The first user message as blocks, without the CLI's system reminders and cache marks, the skill's base
    directory shown relative to the project (the api host's project folder is virtual)."""
    content = body["messages"][0]["content"]
    content = [{"type": "text", "text": content}] if isinstance(content, str) else content
    return [{"type": "text", "text": re.sub(r"(Base directory for this skill: )\S*?(\.claude/skills/)", r"\1\2",
                                            b["text"])}
            for b in content if not b["text"].startswith("<system-reminder>")]


# ---- the parse --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("prompt", "parsed"), [
    ("/alpha", ("alpha", "")),
    ("/alpha summarise the notes", ("alpha", "summarise the notes")),
    ("/alpha\nline two\nline three", ("alpha", "line two\nline three")),
    ("/alpha\tx  ", ("alpha", "x")),
    ("/alpha:x y", ("alpha:x", "y")),
    (" /alpha x", None),  # measured: a leading space makes it plain text
    ("\n/alpha x", None),
    ("please /alpha x", None),
    ("/", None),
    ("/ alpha", None),
])
def test_a_slash_prompt_is_parsed_as_claude_code_reads_it(prompt: str, parsed: tuple[str, str] | None) -> None:
    found = slash.parse(prompt)
    assert (None if found is None else (found.name, found.args)) == parsed
    names = {"alpha": "alpha", "other-name": "folder-x"}
    assert slash.invoked_skill(prompt, names) == ("alpha" if parsed and parsed[0] == "alpha" else None)
    assert slash.invoked_skill("/other-name go", names) == "folder-x"  # a frontmatter name: its folder
    assert slash.invoked_skill("/ALPHA go", names) is None  # case-sensitive, as the CLI


# ---- the api host, in process -------------------------------------------------------------------------------------

@pytest.mark.parametrize("form", sorted(FORMS))
def test_the_api_host_sends_the_blocks_claude_code_sends(form: str, forms_library: Library) -> None:
    prompt, expected, fired = FORMS[form]
    with FakeAnthropic() as fake:
        fake.default(text("ok"))
        obs = run_api(forms_library, fake, prompt)
        [request] = fake.message_requests
    assert obs.ok, obs.error_message
    assert first_user_blocks(request.body) == expected
    assert acts(obs) == [(name, "slash-command", 0, False) for name in fired]


def test_a_skill_users_cannot_invoke_is_refused_without_a_request(forms_library: Library) -> None:
    prompt, answer = REFUSED
    with FakeAnthropic() as fake:
        obs = run_api(forms_library, fake, prompt)
        assert fake.message_requests == []
    assert obs.ok and obs.final_answer == answer and obs.activations == [] and obs.turns == 0


# ---- the two hosts, the real CLI ----------------------------------------------------------------------------------

@pytest.mark.parametrize("form", [*sorted(FORMS), "not-user-invocable"])
def test_claude_code_and_the_api_host_record_the_same_activation(form: str, forms_library: Library,
                                                                  tmp_path: Path) -> None:
    """One CLI session per form: what it sent first and what it recorded is what the api host sends and records."""
    prompt = REFUSED[0] if form == "not-user-invocable" else FORMS[form][0]
    with FakeAnthropic() as fake:
        fake.default(text("ok"))
        cli = run_claude_code(forms_library, fake, prompt, tmp_path)
        cli_requests = list(fake.message_requests)
        api = run_api(forms_library, fake, prompt)
        api_requests = fake.message_requests[len(cli_requests):]
    assert cli.ok and api.ok, (cli.error_message, api.error_message)
    assert acts(cli) == acts(api)
    if form == "not-user-invocable":
        assert cli_requests == api_requests == [] and cli.final_answer == api.final_answer == REFUSED[1]
        return
    assert acts(api) == [(name, "slash-command", 0, False) for name in FORMS[form][2]]
    assert [first_user_blocks(r.body) for r in cli_requests[:1]] == [first_user_blocks(r.body) for r in api_requests[:1]]
