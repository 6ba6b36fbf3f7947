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

from runner.core.observation import Observation, SessionSpec
from runner.corpus import slash
from runner.corpus.library import Library
from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.floor.census import compute
from runner.floor.validate import check_library as validate_library
from runner.hosts.api import ApiHost, with_arguments
from runner.hosts.claude_code import ClaudeCodeHost
from runner.hosts.prices import load as load_prices
from runner.hosts.workspace import LibraryFiles
from runner.plan.planner import unrun_reason
from runner.testing.fake_anthropic import FakeAnthropic, text
from runner.testing.fake_judge import JUDGE_MATCH, verdicts
from tests import round2_slash as r2
from tests.conftest import fake_env, run_cli
from tests.helpers import case, results_of

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


def observed(host: ApiHost | ClaudeCodeHost, prompt: str) -> Observation:
    """One session of `prompt` on `host`, which is closed after it."""
    async def main() -> Observation:
        try:
            return await host.run(spec(prompt))
        finally:
            await host.aclose()
    return asyncio.run(main())


def run_api(library: Library, fake: FakeAnthropic, prompt: str) -> Observation:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    return observed(ApiHost(library, files, load_prices(Settings()), KEY, fake.url, None), prompt)


def run_claude_code(library: Library, fake: FakeAnthropic, prompt: str, work: Path) -> Observation:
    files = LibraryFiles.of(library, Settings().limits.max_file_bytes)
    return observed(ClaudeCodeHost(files, load_prices(Settings()), KEY, fake.url, None, ["Skill", "Read", "Glob", "Grep"],
                                   work_parent=work), prompt)


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

PLACEHOLDERS = "Do $ARGUMENTS now. First $0 then $ARGUMENTS[1] and $2 and $5.\n"


@pytest.mark.parametrize(("args", "expected"), [  # each measured on CLI 2.1.332
    ("", "Do  now. First $0 then $ARGUMENTS[1] and $2 and $5.\n"),
    ("a", "Do a now. First a then $ARGUMENTS[1] and $2 and $5.\n"),
    ('"one two" three', 'Do "one two" three now. First one two then three and $2 and $5.\n'),
    ("'q r' s", "Do 'q r' s now. First q r then s and $2 and $5.\n"),
    ("a\\ b c", "Do a\\ b c now. First a b then c and $2 and $5.\n"),
    ("it's fine", "Do it's fine now. First it's fine then $ARGUMENTS[1] and $2 and $5.\n"),  # an unbalanced quote
])
def test_arguments_are_put_in_as_claude_code_puts_them(args: str, expected: str) -> None:
    assert with_arguments(PLACEHOLDERS, args) == expected
    assert with_arguments("Body.\n", args) == ("Body.\n" + (f"\n\nARGUMENTS: {args}" if args else ""))


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


# ---- item 2: an explicit invocation is not a routing question -----------------------------------------------------

def test_the_prompts_own_action_beats_an_id_prefix_but_not_a_written_field(tmp_path: Path) -> None:
    library, findings = load_library(r2.explicit_invocation(tmp_path / "lib"), Settings())
    kinds = {c.id: (c.kind, c.kind_rule) for c in library.cases}
    assert kinds == {
        "negative-refuses-binary": ("refusal", "explicit-invocation"),  # invoked, expected to decline: judged
        "negative-unrelated": ("no_trigger", "id-prefix:negative-"),  # no slash: the heuristic still reads it
        "redirects": ("trigger", "explicit-invocation"),
        "written-false": ("no_trigger", "field:should_trigger=false"),  # the author's field decides ...
        "files-one": ("trigger", "explicit-invocation"),
    }
    # ... and validate says the case can only fail, where it is written.
    written = next(c for c in library.cases if c.id == "written-false")
    warned = [f for f in validate_library(library, Settings()) if f.rule == "explicit-invocation-no-trigger"]
    assert [(f.file, f.line, f.uid) for f in warned] == [(written.file, written.line, written.uid)]
    census = compute(library, Settings(), findings)
    assert sorted(ref.uid for ref in census.pattern_breaks.explicit_invocations) == sorted(
        c.uid for c in library.cases if c.kind_rule == "explicit-invocation")
    assert census.refusals.by_rule == {"explicit-invocation": 1}


def test_an_explicitly_invoked_negative_case_is_judged_on_its_answer_by_claude_code(tmp_path: Path) -> None:
    """The real CLI expands the command, the skill fires, the refusal is judged: PASS, where it was a no_trigger FAIL."""
    root = r2.explicit_invocation(tmp_path / "lib")
    uid = f"{r2.NOTES}/evals/negative-refuses-binary"
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.default(text("That is a binary file, not notes: paste the notes as text."))
        done = run_cli("run", "--library", str(root), "--out", str(tmp_path / "run"), "--case", uid, "--repeats", "1",
                       "--timeout", "60", env=fake_env(fake, KEY))
    assert done.returncode == 0, done.stdout + done.stderr
    result = case(results_of(tmp_path / "run"), uid)
    assert (result["kind"], result["state"], result["parts"]) == ("refusal", "PASS",
                                                                  {"activation": "PASS", "refusal": "PASS"})


# ---- item 3: manual-only skills invoked by hand run ---------------------------------------------------------------

def test_a_manual_only_skill_invoked_by_hand_runs_and_only_model_picked_cases_wait(tmp_path: Path) -> None:
    root = r2.manual_only_by_hand(tmp_path / "lib")
    library, findings = load_library(root, Settings())
    by_id = {c.id: c for c in library.cases}
    assert unrun_reason(by_id["by-hand"], library) is None
    assert unrun_reason(by_id["picked-by-model"], library) == "manual-only-target"
    [warned] = [f for f in validate_library(library, Settings()) if f.rule == "manual-only-target"]
    assert "1 case(s) need the model to pick manual-only skill(s) release-cutter on its own (picked-by-model)" \
        in warned.message and "invokes the skill by hand" in warned.message
    manual = compute(library, Settings(), findings).manual_only
    assert (manual.cases_targeting, manual.cases, manual.invoked_by_hand) == (
        1, [by_id["picked-by-model"].uid], [by_id["by-hand"].uid])
    # On the api host, through the CLI: the explicit invocation runs and fires, the other stays UNRUN.
    with FakeAnthropic() as fake:
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.default(text("Cut release 2.4.0."))
        done = run_cli("run", "--library", str(root), "--out", str(tmp_path / "run"), "--host", "api",
                       "--repeats", "1", "--timeout", "60", env=fake_env(fake, KEY))
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(tmp_path / "run")
    hand, picked = case(results, by_id["by-hand"].uid), case(results, by_id["picked-by-model"].uid)
    assert (hand["state"], hand["activation"]["state"]) == ("PASS", "PASS")
    assert (picked["state"], picked["reason"]) == ("UNRUN", "manual-only-target")
