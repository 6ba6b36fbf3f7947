"""A small trigger-eval library in skill-creator's layout, and a fake model for it.

skill-creator's description loop and its run_eval.py read one skill's trigger set: a list of `{query,
should_trigger}`. This writes a synthetic one (our own text) — one skill under test, `invoice-scanner`, two
neighbours, and `evals/trigger-evals.json` with `should` queries that should trigger it and `should_not` that
should not — into a library folder, and scripts the fake Messages API as a model that routes by keyword: a query
naming an invoice calls the Skill tool for `invoice-scanner` (when the listing has it), and then answers; any other
query is answered without a tool. Tests and `benchmarks/first_turn.py` use the same set.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from runner.testing.fake_anthropic import FakeAnthropic, dynamic, skill, text

SKILL = "invoice-scanner"
NEIGHBOURS = ("receipt-archiver", "expense-report-writer")
KEYWORD = "invoice"
SHOULD = (
    "Pull the totals out of this invoice PDF for me",
    "Which line items on the attached invoice are taxed?",
    "Read the invoice number and due date from scan-0412.png",
    "Check that this invoice's subtotal adds up",
    "Extract the vendor and VAT id from the invoice",
    "Turn these three invoice scans into one table",
    "Is the invoice from Northwind overdue?",
    "Find the payment terms on this invoice",
    "Get the IBAN printed on the supplier invoice",
    "Compare the two invoice totals and flag the difference",
)
SHOULD_NOT = (
    "Write a haiku about the sea",
    "What is the capital of Portugal?",
    "Rename the variables in utils.py to snake_case",
    "Summarise this meeting transcript in five bullets",
    "Plan a three-day trip to Kyoto",
    "Explain what a B-tree is",
    "Draft a polite reply declining the meeting",
    "Convert 72 Fahrenheit to Celsius",
    "List three good names for a cat",
    "Sort these words alphabetically: pear, apple, fig",
)


def _skill_md(name: str, description: str) -> str:
    return (f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n"
            f"Follow these steps when the task is about {description.split('.')[0].lower()}.\n")


def write_library(root: Path, queries: int = 20) -> Path:
    """The library at `root` (a repository folder with `.claude/skills/`); `queries` of the 20, half should
    trigger (rounded up). Returns `root`."""
    skills = root / ".claude" / "skills"
    descriptions = {
        SKILL: "Reads invoices (totals, line items, tax, vendor details and due dates) from invoice files.",
        NEIGHBOURS[0]: "Files receipts into the archive folder by month and merchant.",
        NEIGHBOURS[1]: "Writes an expense report from a list of expenses, for reimbursement.",
    }
    for name, description in descriptions.items():
        (skills / name).mkdir(parents=True, exist_ok=True)
        (skills / name / "SKILL.md").write_text(_skill_md(name, description), encoding="utf-8")
    (skills / SKILL / "evals").mkdir(exist_ok=True)
    should = SHOULD[:(queries + 1) // 2]
    should_not = SHOULD_NOT[:queries // 2]
    cases = [{"query": q, "should_trigger": True} for q in should]
    cases += [{"query": q, "should_trigger": False} for q in should_not]
    (skills / SKILL / "evals" / "trigger-evals.json").write_text(json.dumps(cases, indent=2) + "\n", encoding="utf-8")
    return root


def _prompt(body: dict[str, Any]) -> str:
    """The case prompt: the first user message's last text block (Claude Code puts its system-reminders, which
    hold the listing, in blocks before it)."""
    for message in body.get("messages", []):
        if message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            return content
        texts = [block.get("text", "") for block in content if isinstance(block, dict) and block.get("type") == "text"]
        return texts[-1] if texts else ""
    return ""


def listed(name: str, body: dict[str, Any]) -> bool:
    """Whether the request lists the skill (Claude Code: a system-reminder in the messages; the api host: the
    system prompt), as `- name: description` or as `- name` alone once the listing budget is spent."""
    shown = json.dumps(body.get("messages", [])) + json.dumps(body.get("system", ""))
    return f"- {name}:" in shown or f"- {name}\\n" in shown


def reply(body: dict[str, Any]) -> Any:
    """The keyword model: once a tool result is in the conversation it answers; a query naming an invoice calls
    the skill when it is listed; anything else is answered directly."""
    messages = json.dumps(body.get("messages", []))
    if '"tool_result"' in messages:
        return text("Invoice read: total 1,240.00 EUR, due 2026-12-31.")
    if KEYWORD in _prompt(body).lower() and listed(SKILL, body):
        return skill(SKILL)
    return text("Here you go.")


def script(fake: FakeAnthropic) -> None:
    """Every query of the set answered by the keyword model (one reply per turn, up to three turns)."""
    for query in (*SHOULD, *SHOULD_NOT):
        fake.script(query, *(dynamic(reply),) * 3)
