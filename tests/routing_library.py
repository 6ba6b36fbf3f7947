"""A library built for the routing matrix's tests (issue 34), and the script of what fires on each of its prompts.

Seven skills with synthetic text: `alpha` steals `beta`'s prompts, `epsilon` never fires, `zeta` is manual-only, a
routing set at the repository's evals/ has two prompts that expect no skill, and one `gamma` case only ever gets
500s (ERROR). Every prompt starts with its own key, so the fake Messages API answers each case by its script.

`SCRIPT` is the whole truth the tests count by hand: case uid -> the skills its every attempt fires, in order
(None: every request of it gets a 500).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.testing.fake_anthropic import FakeAnthropic, error, skill, text

SKILLS = {
    "alpha": "Drafts release notes for alpha packages.",
    "beta": "Reviews beta-channel changelogs.",
    "gamma": "Plans gamma-ray observation schedules.",
    "delta": "Summarises delta tables in a data lake.",
    "epsilon": "Tunes epsilon parameters of a solver.",
    "zeta": "Archives zeta reports (run it by hand only).",
    "eta": "Answers questions about eta estimates.",
}
MANUAL_ONLY = "zeta"


def prompt(key: str) -> str:
    return f"[{key}] please help with this synthetic request about {key.split('-')[0]}"


# uid -> (kind as the corpus gives it, the skills each attempt fires; None = 500 on every request)
SCRIPT: dict[str, list[str] | None] = {
    "alpha/evals/alpha-one": ["alpha"],
    "alpha/evals/alpha-two": ["alpha"],
    "alpha/evals/refusal-alpha-secrets": ["alpha"],
    "beta/evals/beta-one": ["alpha"],                 # alpha steals it
    "beta/evals/beta-two": ["alpha", "beta"],         # alpha first, beta too
    "beta/evals/beta-three": ["beta"],
    "gamma/evals/gamma-one": ["gamma"],
    "gamma/evals/gamma-broken": None,                 # scripted 500s: ERROR
    "gamma/evals/gamma-not": ["delta"],               # gamma stays silent; delta is no claim of this case
    "delta/evals/delta-not": ["delta"],               # delta fires where it must not
    "delta/trigger/delta-vs-gamma": ["delta"],
    "epsilon/evals/epsilon-one": [],                  # never fires
    "epsilon/evals/epsilon-two": [],
    "eta/evals/eta-one": ["eta"],
    "zeta/evals/zeta-one": ["zeta"],                  # manual-only: UNRUN, never sent
    "(library)/routing/none-gamma": ["gamma"],        # expects no skill; gamma fires
    "(library)/routing/none-quiet": [],               # expects no skill; none fires
}
KINDS = {
    "alpha/evals/refusal-alpha-secrets": "refusal", "gamma/evals/gamma-not": "no_trigger",
    "delta/evals/delta-not": "no_trigger", "delta/trigger/delta-vs-gamma": "discrimination",
    "(library)/routing/none-gamma": "no_trigger", "(library)/routing/none-quiet": "no_trigger",
}


def kind_of(uid: str) -> str:
    return KINDS.get(uid, "trigger")


def key_of(uid: str) -> str:
    return f"[{uid.rsplit('/', 1)[1]}]"


def _item(case_id: str, triggers: bool) -> dict[str, Any]:
    return {"id": case_id, "type": "should_trigger" if triggers else "should_not_trigger", "prompt": prompt(case_id),
            "expect": {"triggers": triggers, "assertions": []}}


def make(root: Path) -> Path:
    """Write the library under `root` (a repository: .claude/skills/ and evals/routing.json) and return it."""
    by_skill: dict[str, list[dict[str, Any]]] = {name: [] for name in SKILLS}
    for uid in SCRIPT:
        owner, source, case_id = uid.split("/")
        if source == "evals":
            by_skill[owner].append(_item(case_id, kind_of(uid) != "no_trigger"))
    for name, description in SKILLS.items():
        folder = root / ".claude" / "skills" / name
        (folder / "evals").mkdir(parents=True)
        manual = "disable-model-invocation: true\n" if name == MANUAL_ONLY else ""
        (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {json.dumps(description)}\n{manual}---\n\n"
                                         f"# {name}\n\nSynthetic body for the routing tests.\n")
        (folder / "evals" / "evals.json").write_text(json.dumps({"skill": name, "cases": by_skill[name]}, indent=2))
    discrimination = [{"id": "delta-vs-gamma", "prompt": prompt("delta-vs-gamma"), "expected_skill": "delta",
                       "should_not_trigger": ["gamma"]}]
    (root / ".claude" / "skills" / "delta" / "evals" / "trigger-evals.json").write_text(
        json.dumps({"skill": "delta", "cases": discrimination}, indent=2))
    (root / "evals").mkdir()
    routing = [{"id": case_id, "prompt": prompt(case_id), "expected": None} for case_id in ("none-gamma", "none-quiet")]
    (root / "evals" / "routing.json").write_text(json.dumps({"cases": routing}, indent=2))
    return root


def script(fake: FakeAnthropic) -> None:
    """Every case's attempts fire what SCRIPT says, then answer in text; the broken one gets 500 on every request."""
    for uid, fired in SCRIPT.items():
        if fired is None:
            fake.script(key_of(uid), error(500, "api_error", "scripted failure"))
        else:
            fake.script(key_of(uid), *[skill(name) for name in fired], text("done"))
