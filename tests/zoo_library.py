"""The zoo library of the improve tests (tests/test_improve.py, and the action's improve lane in tests/test_action.py),
and the scripted model that picks a skill from the descriptions it is shown."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from runner.testing.fake_anthropic import dynamic, first_user_text, skill, text

ZOO, YAK, TAX = "zoo-keeper", "yak-groomer", "tax-helper"
CURRENT = "Looks after animals in a zoo: feeding, enclosures and health checks."
GOOD = "Looks after zoo animals, zebras above all: feeding, enclosures, hoof and stripe health checks."
GREEDY = "Looks after zoo animals, zebras and yaks included: feeding, enclosures and health checks."
ANIMALS = ["foal", "stallion", "mare", "calf", "elder", "newcomer", "twin", "rescue", "visitor", "champion"]


def write_skill(root: Path, name: str, description: str, cases: list[dict[str, Any]],
                trigger_cases: list[dict[str, Any]] | None = None) -> None:
    folder = root / ".claude" / "skills" / name
    (folder / "evals").mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {json.dumps(description)}\n---\n\n# {name}\n\nBody.\n")
    (folder / "evals" / "evals.json").write_text(json.dumps({"skill": name, "cases": cases}, indent=2))
    if trigger_cases:
        (folder / "evals" / "trigger-evals.json").write_text(
            json.dumps({"skill": name, "cases": trigger_cases}, indent=2))


def case(case_id: str, prompt: str, triggers: bool) -> dict[str, Any]:
    return {"id": case_id, "type": "should_trigger" if triggers else "should_not_trigger", "prompt": prompt,
            "expect": {"triggers": triggers, "assertions": []}}


def zoo_trigger_prompts() -> list[str]:
    return [f"Our zebra {a} number {i} is limping after the move; what should the keepers check first?"
            for i, a in enumerate(ANIMALS + ANIMALS)]


def make_library(root: Path) -> Path:
    """20 trigger and 6 no_trigger cases and one discrimination case for zoo-keeper; 3 trigger cases for its
    neighbour yak-groomer; an unrelated tax-helper."""
    zoo = [case(f"zebra-{i:02d}", p, True) for i, p in enumerate(zoo_trigger_prompts())]
    zoo += [case(f"tax-{i}", f"Help me file my tax return for year {2020 + i}, I am self-employed.", False)
            for i in range(6)]
    discrimination = [{"id": "zoo-yak-pen", "prompt": "The zoo's yak pen needs a winter feeding plan for the keepers.",
                       "expected_skill": ZOO, "should_not_trigger": [YAK]}]
    write_skill(root, ZOO, CURRENT, zoo, discrimination)
    write_skill(root, YAK, "Grooms yaks: brushing, shearing and hoof care for yaks.",
                [case(f"groom-{i}", f"Please groom my yak number {i} before the show, its coat is matted.", True)
                 for i in range(3)])
    write_skill(root, TAX, "Prepares tax returns and answers tax questions.",
                [case("tax-own", "What can I deduct on my tax return as a freelancer?", True)])
    return root


def listing_of(body: dict[str, Any]) -> dict[str, str]:
    """name -> description as the api host's system prompt lists them."""
    system = body.get("system")
    shown = system if isinstance(system, str) else "".join(b.get("text", "") for b in system or [])
    return {m[1]: m[2] for m in re.finditer(r"(?m)^- ([\w-]+): (.*)$", shown)}


def choose(body: dict[str, Any]) -> Any:
    """The scripted model (tests/test_improve.py's docstring): its choice depends on the prompt and the listed descriptions."""
    listed = listing_of(body)
    prompt, zoo = first_user_text(body).lower(), listed.get(ZOO, "").lower()
    if "yak" in prompt and "yak" in zoo:
        return skill(ZOO)
    if "zebra" in prompt and "zebra" in zoo:
        return skill(ZOO)
    if "yak" in prompt and "yak" in listed.get(YAK, "").lower():
        return skill(YAK)
    if "tax" in prompt:
        return skill(TAX)
    return text("Answered directly.")


def proposals(*descriptions: str) -> Any:
    reply = {"candidates": [{"description": d, "rationale": "scripted"} for d in descriptions]}
    return dynamic(lambda body: text(json.dumps(reply)))
