"""Synthetic libraries for issue 29 items 4, 5 and 6: what an item means when its fields do not say its kind.

Every text here is written for these tests; the key names and sentence shapes follow public libraries, the words
do not. Each builder writes a library into an empty folder and returns the path to pass as --library.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.compat_libraries import creator_evals, git_init, skill, write_json

# Item 4: `type` values that file a case under a category, beside the fields that say what it is.
TAGS = ("behavior", "contract", "security", "benchmark", "planning")


def category_tags(root: Path) -> Path:
    """One skill whose skill-creator evals carry category tags as `type` / `kind`, one misspelt kind (`negatve`)
    and one kind spelt another way (`No-Trigger`)."""
    git_init(root)
    folder = skill(root / "skills" / "ledger-summary",
                   description="Summarise a ledger export into totals per account. Use for ledger or bookkeeping "
                               "exports.")
    items = [{"id": f"{tag}-1", "type": tag, "prompt": f"Summarise the {tag} ledger export by account.",
              "expected_output": "Totals per account.", "expectations": ["Lists a total for every account."]}
             for tag in TAGS[:3]]
    items.append({"id": "benchmark-1", "kind": "benchmark", "should_trigger": False,
                  "prompt": "What is the capital of Peru?", "expected_output": "Lima."})
    items.append({"id": "planning-1", "type": "planning", "prompt": "Plan next month's ledger close.",
                  "expectations": ["Names the accounts to reconcile first."]})
    items.append({"id": "typo-1", "type": "negatve", "prompt": "Write a haiku about rain."})
    items.append({"id": "spelt-1", "type": "No-Trigger", "prompt": "Translate 'good morning' into French."})
    write_json(folder / "evals" / "evals.json", {"skill_name": "ledger-summary", "evals": items})
    return root


def negative_scenarios(root: Path) -> Path:
    """Negative controls written as scenarios and expectations: "Agent does NOT activate …", a scenario named
    "Does not trigger …", "should not use the … skill"; beside them a real trigger scenario."""
    git_init(root)
    pdf = skill(root / "skills" / "pdf-tools", description="Fill, merge and split PDF files. Use for any PDF task.")
    creator_evals(skill(root / "skills" / "sheet-tools",
                        description="Edit spreadsheets and CSV files. Use for spreadsheet work."), "sheet-tools", 1)
    write_json(pdf / "evaluations" / "spreadsheet.json", {
        "skills": ["pdf-tools"], "query": "Add a column of totals to budget.csv.",
        "expected_behavior": ["Agent does NOT activate the pdf-tools skill"]})
    write_json(pdf / "evaluations" / "weather.json", {
        "name": "Does not trigger pdf-tools for small talk", "skills": ["pdf-tools"],
        "query": "Is it going to rain tomorrow?", "expected_behavior": ["Answers without asking for a file."]})
    write_json(pdf / "evaluations" / "merge.json", {
        "skills": ["pdf-tools"], "query": "Merge a.pdf and b.pdf into one file.",
        "expected_behavior": ["Agent activates the pdf-tools skill", "Merges the two files in order."]})
    write_json(pdf / "evals" / "evals.json", {"skill_name": "pdf-tools", "evals": [
        {"id": 1, "prompt": "Split report.pdf into one file per page.", "expected_output": "One file per page."},
        {"id": 2, "prompt": "Sort these names alphabetically: Zoe, Adam.",
         "expectations": ["The agent should not use the pdf-tools skill.", "Returns Adam, Zoe."]}]})
    return root


def deferrals(root: Path) -> Path:
    """A pricing skill whose evals hand CRO requests to page-cro: deferral cases. Beside them a deferral to a
    skill the library does not have (stays a trigger case) and a negated one (stays a trigger case)."""
    git_init(root)
    pricing = skill(root / "skills" / "pricing-strategy",
                    description="Set and change prices, tiers and discounts. Use for pricing decisions.")
    creator_evals(skill(root / "skills" / "page-cro",
                        description="Improve a landing page's conversion rate. Use for CRO work."), "page-cro", 1)
    write_json(pricing / "evals" / "evals.json", {"skill_name": "pricing-strategy", "evals": [
        {"id": "tiers", "prompt": "Design three pricing tiers for a note-taking app.",
         "expected_output": "Three tiers with prices.", "expectations": ["Names a price for each tier."]},
        {"id": "checkout-cro", "prompt": "Our checkout page converts at 1%; how do we raise it?",
         "expected_output": "Recognises this is conversion work, not pricing strategy, and defers to the page-cro "
                            "skill."},
        {"id": "landing-copy", "prompt": "Rewrite the hero section of our landing page to convert better.",
         "expectations": ["Not pricing strategy: cross-reference page-cro."]},
        {"id": "seo-question", "prompt": "How do we rank for 'cheap notes app'?",
         "expected_output": "Defers to the seo-audit skill."},
        {"id": "discount", "prompt": "Should we offer a 20% launch discount?",
         "expectations": ["Does not defer to page-cro; answers the discount question itself."]},
        # Invoked by hand (issue 29 item 2): the redirect is what the skill does once invoked, judged on the answer.
        {"id": "invoked-redirect", "prompt": "/pricing-strategy our checkout converts at 1%, fix it",
         "expected_output": "Says this is conversion work and defers to the page-cro skill."}]})
    return root


def scenario_e2e(root: Path) -> Path:
    """The end-to-end pair: one negative control written as a scenario, one deferral, activation claims only (so
    no judge call is needed for either)."""
    git_init(root)
    pricing = skill(root / "skills" / "pricing-strategy",
                    description="Set and change prices, tiers and discounts. Use for pricing decisions.")
    creator_evals(skill(root / "skills" / "page-cro",
                        description="Improve a landing page's conversion rate. Use for CRO work."), "page-cro", 1)
    write_json(pricing / "evaluations" / "weather.json", {
        "skills": ["pricing-strategy"], "query": "Is it going to rain in Lisbon tomorrow?",
        "expected_behavior": ["Agent does NOT activate the pricing-strategy skill"]})
    write_json(pricing / "evals" / "evals.json", {"skill_name": "pricing-strategy", "evals": [
        {"id": "checkout-cro", "type": "behavior", "prompt": "Our checkout page converts at 1%; how do we raise it?",
         "expectations": ["Defers to the page-cro skill."]}]})
    return root


LIBRARIES: dict[str, Callable[[Path], Path]] = {
    "category-tags": category_tags,
    "negative-scenarios": negative_scenarios,
    "deferrals": deferrals,
    "scenario-e2e": scenario_e2e,
}
