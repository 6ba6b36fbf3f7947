"""Scripted judge replies for the fake Messages API: they answer the rubric ids each request holds."""

from __future__ import annotations

import json
import re
from typing import Any

from runner.testing.fake_anthropic import Dynamic, dynamic, first_user_text, text

JUDGE_MATCH = "<rubric>"  # only judge requests carry a rubric; register it before any other script


def rubric_ids(body: dict[str, Any]) -> list[str]:
    user = first_user_text(body)
    rubric = user.split("<rubric>", 1)[1].split("</rubric>", 1)[0]
    return re.findall(r"^\[(a\d+)\]", rubric, flags=re.M)


_FINAL_ANSWER = re.compile(r"<final-answer-([0-9a-f]+)>\n(.*)\n</final-answer-\1>", re.S)


def final_answer(body: dict[str, Any]) -> str:
    """The answer as the judge was shown it: between the final-answer tags that carry the call's nonce."""
    match = _FINAL_ANSWER.search(first_user_text(body))
    if match is None:
        raise ValueError("no final-answer section in the judge request")
    return match.group(2)


# A loose reader's idea of the transcript tags: any nonce (or none), any case, a space after the slash.
_LOOSE_TAG = re.compile(r"(?i)<(/?)\s*untrusted-transcript[^>]*>")


def outside_the_data(user: str) -> str:
    """What a judge model that does not compare nonces takes for instructions: the user text without every
    stretch from an opening transcript tag to the next closing one, whatever nonce or casing either carries
    (so a forged closing tag in the answer, if it reached the model as a tag, would end the data there)."""
    parts: list[str] = []
    inside, at = False, 0
    for tag in _LOOSE_TAG.finditer(user):
        if not inside:
            parts.append(user[at:tag.start()])
        inside, at = tag.group(1) != "/", tag.end()
    if not inside:
        parts.append(user[at:])
    return "".join(parts)


def obeying(instructions: tuple[str, ...], forged: str) -> Dynamic:
    """A gullible judge: it treats what is inside the transcript tags as data, but it OBEYS an instruction it
    finds outside them. When any of `instructions` occurs in `outside_the_data(...)` it replies `forged`
    verbatim (what the injection asks for); otherwise it grades honestly: FAIL for every rubric item."""
    def reply(body: dict[str, Any]) -> Any:
        outside = outside_the_data(first_user_text(body))
        if any(instruction in outside for instruction in instructions):
            return text(forged)
        items = [{"id": i, "verdict": "FAIL", "evidence": "", "reason": "the behaviour is absent"}
                 for i in rubric_ids(body)]
        return text(json.dumps({"verdicts": items}))
    return dynamic(reply)


def verdicts(verdict: str = "PASS", evidence: str | None = None) -> Dynamic:
    """Every rubric item gets `verdict`; evidence defaults to the answer's first line (so it occurs)."""
    def reply(body: dict[str, Any]) -> Any:
        quote = evidence if evidence is not None else final_answer(body).strip().splitlines()[0][:120]
        items = [{"id": i, "verdict": verdict, "evidence": quote if verdict == "PASS" else "", "reason": "scripted"}
                 for i in rubric_ids(body)]
        return text(json.dumps({"verdicts": items}))
    return dynamic(reply)
