"""Deciding, from the corpus as written, what each case and each assertion is.

Case kinds follow semantics §2; assertion classes follow §6. Every decision records the rule
that made it, so the census can show authors why a case is a refusal or why an assertion goes
to the judge, and an override in `.skill-evals.toml` can correct any single decision.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

import yaml

from runner.settings import ClassifySettings

KNOWN_EVAL_TYPES = ("should_trigger", "should_not_trigger", "should_not_do")


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: re.Pattern[str]


@dataclass(frozen=True)
class Rules:
    activation: tuple[Rule, ...]
    unjudgeable: tuple[Rule, ...]
    workspace_prompt: tuple[Rule, ...]
    signposts: tuple[str, ...]


@lru_cache(maxsize=1)
def packaged_rules() -> Rules:
    """The rules shipped in runner/data/rules.yaml (read once; they are immutable data)."""
    raw = yaml.safe_load(resources.files("runner").joinpath("data", "rules.yaml").read_text(encoding="utf-8"))

    def group(name: str) -> tuple[Rule, ...]:
        return tuple(Rule(id=r["id"], pattern=re.compile(r["pattern"])) for r in raw[name])

    return Rules(activation=group("activation"), unjudgeable=group("unjudgeable"),
                 workspace_prompt=group("workspace_prompt"),
                 signposts=tuple(str(phrase).lower() for phrase in raw["signposts"]))


# ---- case kinds -------------------------------------------------------------------------------

def _refusal_id_rule(case_id: str, settings: ClassifySettings) -> str | None:
    if any(case_id.startswith(p) for p in settings.refusal_id_exclude_prefixes):
        return None
    for prefix in settings.refusal_id_prefixes:
        if case_id.startswith(prefix):
            return f"id-prefix:{prefix}"
    return None


def evals_case_kind(case_type: object, case_id: str, settings: ClassifySettings) -> tuple[str, str]:
    """(kind, rule) for an Aegis evals.json case. Unknown types are never mapped to known ones."""
    if case_type in settings.refusal_types:
        return "refusal", f"type:{case_type}"
    if case_type == "should_trigger":
        rule = _refusal_id_rule(case_id, settings)
        return ("refusal", rule) if rule else ("trigger", "type:should_trigger")
    if case_type == "should_not_trigger":
        return "no_trigger", "type:should_not_trigger"
    return "unknown", "unknown-case-type"


def looks_like_refusal_id(case_id: str, settings: ClassifySettings) -> bool:
    return _refusal_id_rule(case_id, settings) is not None


def is_halt_id(case_id: str, settings: ClassifySettings) -> bool:
    return any(case_id.startswith(p) for p in settings.halt_id_prefixes)


# ---- assertion classes ------------------------------------------------------------------------

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_CAPS_HEAD = re.compile(r"^[\s>*_`#]*([A-Z][A-Z0-9&/'._-]*(?:[ \t]+[A-Z0-9&/'._-]+)*[A-Z0-9])")
_BRACKET_TOKEN = re.compile(r"\[[A-Z][A-Z0-9 _/-]{2,}\]")
_BACKTICK = re.compile(r"`([^`\n]{3,})`")


def output_format_section(body: str) -> str | None:
    """The text under the skill's `## Output Format` heading, up to the next heading of its level."""
    lines = body.splitlines()
    start, level = None, 0
    in_fence = False
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence:
            continue
        match = _HEADING.match(line)
        if not match:
            continue
        if start is None and match.group(2).strip().lower() == "output format":
            start, level = index + 1, len(match.group(1))
        elif start is not None and len(match.group(1)) <= level:
            return "\n".join(lines[start:index])
    return "\n".join(lines[start:]) if start is not None else None


def _outside_fences(lines: list[str]) -> list[str]:
    """The prose lines: inside a fence, backticks are characters of the output, not code spans."""
    out, in_fence = [], False
    for line in lines:
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence:
            out.append(line)
    return out


def shape_literals(body: str) -> dict[str, list[str]]:
    """Literals an answer in the skill's Output Format must contain, by the rule that found them."""
    section = output_format_section(body) or ""
    header: list[str] = []
    lines = section.splitlines()
    for index, line in enumerate(lines):
        if _FENCE.match(line):
            first = next((candidate for candidate in lines[index + 1:] if candidate.strip()), "")
            match = _CAPS_HEAD.match(first)
            if match and len(match.group(1)) >= 4 and not _FENCE.match(first):
                header.append(match.group(1).strip())
            break
    prose = "\n".join(_outside_fences(lines))
    return {
        "shape-output-header": header,
        "shape-bracket-token": sorted(set(_BRACKET_TOKEN.findall(body))),
        "shape-backtick-literal": sorted({m for m in _BACKTICK.findall(prose) if len(m.strip()) >= 3}),
    }


@dataclass(frozen=True)
class AssertionDecision:
    assertion_class: str
    rule: str
    hooks: tuple[str, ...] = ()
    # An artifact-shape assertion says more than "contains the literal" unless it is short: then a
    # missing literal is a certain FAIL, but a present one still leaves the rest to the judge.
    shape_only: bool = False


# A literal under negation ("does not return [GREEN]") or among alternatives ("[GREEN], [RED] or
# [NOT PROVEN]") is not a literal the answer must contain: such assertions go to the judge.
_NEGATION = re.compile(r"(?i)\b(not|never|no|without|nor)\b|n't\b")
_ALTERNATIVE = re.compile(r"(?i)\bor\b")
_SHAPE_ONLY_MAX_WORDS = 8


def _shape_only(text: str, hooks: tuple[str, ...]) -> bool:
    return len(re.findall(r"[A-Za-z]+", _without(text, hooks))) <= _SHAPE_ONLY_MAX_WORDS


def _without(text: str, hooks: tuple[str, ...]) -> str:
    for literal in hooks:
        text = text.replace(literal, " ")
    return text


def _shape(text: str, literals: dict[str, list[str]]) -> AssertionDecision | None:
    quoted = set(_BACKTICK.findall(text))
    for rule_id in ("shape-output-header", "shape-bracket-token", "shape-backtick-literal"):
        candidates = literals.get(rule_id, [])
        hits = tuple(lit for lit in candidates if (lit in quoted if rule_id == "shape-backtick-literal" else lit in text))
        if not hits:
            continue
        rest = _without(text, hits)
        if _NEGATION.search(rest) or (len(hits) > 1 and _ALTERNATIVE.search(rest)):
            return None
        return AssertionDecision("artifact_shape", rule_id, hits, _shape_only(text, hits))
    return None


def assertion_class(text: str, literals: dict[str, list[str]], rules: Rules) -> AssertionDecision:
    for rule in rules.activation:
        if rule.pattern.search(text):
            return AssertionDecision("activation", rule.id)
    shape = _shape(text, literals)
    if shape is not None:
        return shape
    for rule in rules.unjudgeable:
        if rule.pattern.search(text):
            return AssertionDecision("unjudgeable", rule.id)
    return AssertionDecision("semantic", "default-semantic")


def workspace_signals(prompt: str, rules: Rules) -> list[str]:
    return [rule.id for rule in rules.workspace_prompt if rule.pattern.search(prompt)]
