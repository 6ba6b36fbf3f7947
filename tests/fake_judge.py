"""Scripted judge replies for the fake Messages API: they answer the rubric ids each request holds."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fake_anthropic import Dynamic, dynamic, first_user_text, text

JUDGE_MATCH = "<rubric>"  # only judge requests carry a rubric; register it before any other script


def rubric_ids(body: dict[str, Any]) -> list[str]:
    user = first_user_text(body)
    rubric = user.split("<rubric>", 1)[1].split("</rubric>", 1)[0]
    return re.findall(r"^\[(a\d+)\]", rubric, flags=re.M)


def final_answer(body: dict[str, Any]) -> str:
    user = first_user_text(body)
    return user.split("<final-answer>\n", 1)[1].rsplit("\n</final-answer>", 1)[0]


def verdicts(verdict: str = "PASS", evidence: str | None = None) -> Dynamic:
    """Every rubric item gets `verdict`; evidence defaults to the answer's first line (so it occurs)."""
    def reply(body: dict[str, Any]) -> Any:
        quote = evidence if evidence is not None else final_answer(body).strip().splitlines()[0][:120]
        items = [{"id": i, "verdict": verdict, "evidence": quote if verdict == "PASS" else "", "reason": "scripted"}
                 for i in rubric_ids(body)]
        return text(json.dumps({"verdicts": items}))
    return dynamic(reply)
