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
from typing import Any

import yaml

from runner.core.kinds import LoadedKind
from runner.corpus.settings import ClassifySettings

KNOWN_EVAL_TYPES = ("should_trigger", "should_not_trigger", "should_not_do")


@dataclass(frozen=True)
class Rule:
    id: str
    pattern: re.Pattern[str]
    # Activation rules: whether the skill they name must fire ("positive") or stay silent ("negative").
    polarity: str | None = None
    # The pattern as written, when it names skills through {skill} / {named_skill}: compiled again
    # with each library's names (`pattern` holds the expansion for unknown names).
    template: str | None = None
    # A cheap lowercase pattern that must match the lowercased text first (see rules.yaml).
    guard: re.Pattern[str] | None = None
    # Decides only as an assertion's first claim (see rules.yaml).
    first_only: bool = False

    def search(self, text: str) -> re.Match[str] | None:
        if self.guard is not None and not self.guard.search(text.lower()):
            return None
        return self.pattern.search(text)


@dataclass(frozen=True, eq=False)  # hashed by identity: it keys the per-library rule cache
class Rules:
    activation: tuple[Rule, ...]
    unjudgeable: tuple[Rule, ...]
    workspace_prompt: tuple[Rule, ...]
    signposts: tuple[str, ...]
    # Phrases saying a request belongs to another skill (runner.corpus.kind_words: deferral cases).
    deferral: tuple[Rule, ...] = ()


@lru_cache(maxsize=1)
def packaged_rules() -> Rules:
    """The rules shipped in runner/data/rules.yaml (read once; they are immutable data)."""
    raw = yaml.safe_load(resources.files("runner").joinpath("data", "rules.yaml").read_text(encoding="utf-8"))

    def group(name: str) -> tuple[Rule, ...]:
        return tuple(_rule(r["id"], r["pattern"], r.get("polarity"), frozenset(),
                           re.compile(r["guard"]) if r.get("guard") else None, bool(r.get("first_only")))
                     for r in raw[name])

    return Rules(activation=group("activation"), unjudgeable=group("unjudgeable"),
                 workspace_prompt=group("workspace_prompt"),
                 signposts=tuple(str(phrase).lower() for phrase in raw["signposts"]), deferral=group("deferral"))


# ---- naming skills ----------------------------------------------------------------------------
#
# `names` is every name an activation can be observed under: the library's skills, `<agent>
# (subagent)` for each subagent, and any other name the host lists a skill under. The classifier
# and the verdict find names with the same function, so they cannot disagree about which skill an
# assertion names. An empty set means the names are unknown: any kebab-case token then counts,
# the runner's reading before it knew the library.

SUBAGENT_SUFFIX = " (subagent)"
_KEBAB = r"[a-z0-9]++(?:-[a-z0-9]++)+"
_OPEN_QUOTE, _CLOSE_QUOTE = "[`'\"\u201c\u2018]?", "[`'\"\u201d\u2019]?"
# A name stands alone: not inside a longer token or path, optionally behind `plugin:`, never
# followed by a possessive (`this skill's references` are not the skill).
_BEFORE = r"(?<![\w:./-])" + _OPEN_QUOTE + r"(?:[A-Za-z0-9_.-]++:)?"
_AFTER = _CLOSE_QUOTE + r"(?![\w-])(?!['\u2019]s\b)"
_SUBAGENT = r"(?i:\s+\(subagent\)|\s+subagent\b)"
_SELF = r"\b(?:this|the)\s+skill\b(?!['\u2019]s\b)"


def _trie(words: list[str]) -> str:
    """An alternation of literal words factored by prefix (fast to try; the longest wins first)."""
    tree: dict[str, dict[str, Any]] = {}
    for word in words:
        node = tree
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}

    def render(node: dict[str, dict[str, Any]]) -> str:
        ends = "" in node
        branches = [re.escape(char) + render(child) for char, child in sorted(node.items()) if char]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        return f"(?:{body})?" if ends else body

    return render(tree)


def _base_names(names: frozenset[str]) -> tuple[list[str], list[str]]:
    skills = [n for n in names if not n.endswith(SUBAGENT_SUFFIX)]
    agents = [n[: -len(SUBAGENT_SUFFIX)] for n in names if n.endswith(SUBAGENT_SUFFIX)]
    return skills, agents


@lru_cache(maxsize=16)
def _name_pattern(names: frozenset[str]) -> str:
    """A regular expression for one mention of a name; group `agent` or `skill` holds the bare name."""
    skills, agents = _base_names(names)
    agent = _KEBAB if not names else (_trie(agents) if agents else None)
    skill = _KEBAB if not names else (_trie(skills) if skills else None)
    options = []
    if agent:
        options.append(f"(?P<agent>{agent}){_CLOSE_QUOTE}{_SUBAGENT}")
    if skill:
        options.append(f"(?P<skill>{skill})(?!{_SUBAGENT})")
    if not options:
        return r"(?!x)x"  # no name at all can match
    return _BEFORE + "(?-i:" + "|".join(options) + ")" + _AFTER


@lru_cache(maxsize=16)
def _mention_regex(names: frozenset[str]) -> re.Pattern[str]:
    return re.compile(_name_pattern(names))


@dataclass(frozen=True)
class Mention:
    name: str  # as `names` holds it: `pdf`, `security-reviewer (subagent)`
    start: int
    end: int


def mentions(text: str, names: frozenset[str]) -> list[Mention]:
    """Every name of the library the text mentions, in order, the longest name at each place."""
    out = []
    for match in _mention_regex(names).finditer(text):
        name = match.group("agent") + SUBAGENT_SUFFIX if match.groupdict().get("agent") else match.group("skill")
        out.append(Mention(name, match.start(), match.end()))
    return out


def skill_mentions(text: str, names: frozenset[str]) -> list[str]:
    """The names a text mentions, in order of first appearance."""
    seen: list[str] = []
    for mention in mentions(text, names):
        if mention.name not in seen:
            seen.append(mention.name)
    return seen


def _expand(template: str, names: frozenset[str]) -> str:
    ref = _name_pattern(names)
    skill = rf"(?:(?:the\s+)?{ref}(?:\s+skill\b)?|{_SELF})"
    named_skill = rf"(?:the\s+)?{ref}\s+skill\b"
    # Each placeholder gets its own copy of the name's groups: Python refuses a group name twice.
    parts = re.split(r"(\{skill\}|\{named_skill\})", template)
    out = []
    for index, part in enumerate(parts):
        if part in ("{skill}", "{named_skill}"):
            expanded = skill if part == "{skill}" else named_skill
            out.append(expanded.replace("?P<agent>", f"?P<agent{index}>").replace("?P<skill>", f"?P<skill{index}>"))
        else:
            out.append(part)
    return "".join(out)


def _rule(rule_id: str, pattern: str, polarity: str | None, names: frozenset[str],
          guard: re.Pattern[str] | None = None, first_only: bool = False) -> Rule:
    if "{skill}" not in pattern and "{named_skill}" not in pattern:
        return Rule(rule_id, re.compile(pattern), polarity, guard=guard, first_only=first_only)
    return Rule(rule_id, re.compile(_expand(pattern, names)), polarity, template=pattern, guard=guard,
                first_only=first_only)


@lru_cache(maxsize=16)
def activation_rules(rules: Rules, names: frozenset[str]) -> tuple[Rule, ...]:
    """The activation rules with this library's names in place of {skill} / {named_skill}."""
    if not names:
        return rules.activation
    return tuple(_rule(r.id, r.template, r.polarity, names, r.guard, r.first_only) if r.template else r
                 for r in rules.activation)


@lru_cache(maxsize=16)
def deferral_rules(rules: Rules, names: frozenset[str]) -> tuple[Rule, ...]:
    """The deferral rules with this library's names in place of {skill} / {named_skill}."""
    return tuple(_rule(r.id, r.template, r.polarity, names, r.guard) if r.template and names else r
                 for r in rules.deferral)


_CLAUSE_END = re.compile(r";|(?<=[.!?])\s+(?=[A-Z`*\"'])")


def clauses(text: str) -> list[tuple[int, str]]:
    """(offset, clause) at semicolons and sentence ends: each clause can make its own claim."""
    out, start = [], 0
    for match in _CLAUSE_END.finditer(text):
        out.append((start, text[start:match.start()]))
        start = match.end()
    out.append((start, text[start:]))
    return [(offset, clause) for offset, clause in out if clause.strip()]


@dataclass(frozen=True)
class Claim:
    """One clause of an activation assertion: the skill it names (None = "this skill", the case's
    own target) and whether that skill must fire."""
    name: str | None
    must_fire: bool
    rule: str


def activation_claims(text: str, rules: Rules, names: frozenset[str]) -> list[Claim]:
    """What an activation assertion requires, clause by clause ("Invokes `a`; does not invoke `b`")."""
    claims: list[Claim] = []
    for _, clause in clauses(text):
        for rule in activation_rules(rules, names):
            match = rule.search(clause)
            if not match:
                continue
            if not (rule.first_only and claims):
                named = [m for m in mentions(clause, names) if match.start() <= m.start < match.end()]
                claims.append(Claim(named[0].name if named else None, rule.polarity != "negative", rule.id))
            break
    return claims


# ---- case kinds -------------------------------------------------------------------------------

def _refusal_id_rule(case_id: str, settings: ClassifySettings) -> str | None:
    if any(case_id.startswith(p) for p in settings.refusal_id_exclude_prefixes):
        return None
    for prefix in settings.refusal_id_prefixes:
        if case_id.startswith(prefix):
            return f"id-prefix:{prefix}"
    return None


def evals_case_kind(case_type: object, case_id: str, settings: ClassifySettings) -> tuple[LoadedKind, str]:
    """(kind, rule) for an Aegis evals.json case. Unknown types are never mapped to known ones."""
    if case_type in settings.refusal_types:
        return "refusal", f"type:{case_type}"
    if case_type == "should_trigger":
        rule = _refusal_id_rule(case_id, settings)
        return ("refusal", rule) if rule else ("trigger", "type:should_trigger")
    if case_type == "should_not_trigger":
        return "no_trigger", "type:should_not_trigger"
    return "unknown", "unknown-case-type"


# A case whose prompt invokes its own skill by hand (`/name ...`, runner.corpus.slash) tests what the skill does once
# invoked, not whether the model picks it: the host expands the command, so the skill fires whatever the model would
# have chosen. The prompt's own action beats every heuristic (an id prefix such as `negative-`, the wording of an
# expected output, a format's default); only what the author wrote explicitly still decides: a `should_trigger` or
# `type`/`kind` field, a typed Aegis case, a trigger set's `should_trigger`, a routing set's `expected_skill`, an
# override. A heuristic that read the case as a negative control (or a routing case) becomes `refusal`: the skill
# fires and its expected outcome — a refusal, a redirect — is judged on the answer, reported apart from activation.
EXPLICIT_INVOCATION = "explicit-invocation"
WRITTEN_RULES = ("field:", "type:", "format:trigger-set", "format:routing", "override", "unknown-case-type",
                 "schema-invalid", "type-triggers-conflict", "routing-")


def invocation_kind(kind: LoadedKind, rule: str, invokes_target: bool) -> tuple[LoadedKind, str]:
    """(kind, rule) of a case once what its prompt does is known; `invokes_target`: the prompt is a slash command
    of the case's own target."""
    if not invokes_target or kind in ("unknown", "invalid") or rule.startswith(WRITTEN_RULES):
        return kind, rule
    return ("trigger" if kind == "trigger" else "refusal"), EXPLICIT_INVOCATION


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


def assertion_class(text: str, literals: dict[str, list[str]], rules: Rules,
                    names: frozenset[str] = frozenset()) -> AssertionDecision:
    """`names`: see "naming skills" above. Only an assertion that names a skill of the library (or
    says "this skill" / "the skill") is about activation: "Does not load entire CI logs" is not."""
    for rule in activation_rules(rules, names):
        if rule.search(text):
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
