"""Eval files as libraries commit them: which shape a JSON file is, and what each item of it says.

From the parsed JSON alone (runner.corpus.library reads the files): the shape (`aegis-evals`, `skill-creator`,
`trigger-set`, `scenario`, `skill-checks`, `routing`, ...; schemas in runner/schemas) and its items. An unused key
is a warning, never a reason to drop a case.

Design notes: docs/design/library-layouts.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from runner.core.kinds import LoadedKind
from runner.corpus import schema_check as schemas
from runner.corpus import tags
from runner.corpus.library import RoutingOrder, RoutingSpec

# Routing assertions (runner.corpus.library.RoutingSpec) as authors already write them: skill-up's `must_include` /
# `must_not_include` / `allow_extra` / `max_skills` (at the item's top, or nested under `routing_expect` as skill-up
# nests them) and waza's `required_skills` / `forbidden_skills` with `mode`.
MUST_KEYS = ("must_include", "required_skills")
MUST_NOT_KEYS = ("must_not_include", "forbidden_skills")
ROUTING_NEST = "routing_expect"
ROUTING_SPEC_KEYS = frozenset({*MUST_KEYS, *MUST_NOT_KEYS, "allow_extra", "max_skills", "mode", ROUTING_NEST})
# waza's spellings of the order rule (and the same with `-`), as the shipped schemas list them.
MODES: dict[str, RoutingOrder] = {"any_order": "any_order", "in_order": "in_order", "exact": "exact",
                                  "any-order": "any_order", "in-order": "in_order"}

# Keys each shape reads; any other key of an item is reported once per file as unused.
CREATOR_KEYS = frozenset({"id", "eval_id", "eval_name", "name", "prompt", "input", "expected_output", "expected",
                          "expected_behavior", "files", "input_files", "expectations", "assertions", "should_trigger",
                          "type", "kind", "description"}) | ROUTING_SPEC_KEYS
CREATOR_TOP_KEYS = frozenset({"$schema", "skill_name", "evals", "description"})
TRIGGER_KEYS = frozenset({"id", "query", "prompt", "should_trigger", "split", "note", "reason"})
SCENARIO_KEYS = frozenset({"id", "name", "description", "skills", "query", "prompt", "files", "expected_behavior",
                           "expected_behaviors", "expectedBehaviors", "type", "kind"})
ROUTING_KEYS = frozenset({"id", "prompt", "query", "expected", "expected_skill", "expectedSkill", "expected_skills",
                          "relevant_skills", "expect_selected", "unexpected_skills", "unexpectedSkills",
                          "expect_not_selected", "note", "notes", "rationale", "reason"}) | ROUTING_SPEC_KEYS
CHECKS_KEYS = frozenset({"id", "name", "prompt", "query", "checks", "description", "note"})
CHECKS_READ = frozenset({"skill_invoked"})  # what a `checks` object says that the runner reads
CHECKS_OWNER_KEYS = ("skill", "skill_name")
EXPECTED_KEYS = ("expected", "expected_skill", "expectedSkill", "expected_skills", "relevant_skills", "expect_selected")
UNEXPECTED_KEYS = ("unexpected_skills", "unexpectedSkills", "expect_not_selected")
BEHAVIOUR_KEYS = ("expected_behavior", "expected_behaviors", "expectedBehaviors")

# Types (`type` / `kind`) of a skill-creator item, by the kind they make. Another value is a type the
# runner does not know: the case is not run (semantics §2), and the census says so.
TRIGGER_TYPES = frozenset({"trigger", "should_trigger", "positive", "standard", "boundary", "edge", "core",
                           "happy-path", "happy_path"})
NEGATIVE_TYPES = frozenset({"negative", "anti", "no_trigger", "no-trigger", "should_not_trigger",
                            "should-not-trigger", "not_trigger", "negative_control"})
NEGATIVE_ID_PREFIXES = ("negative-", "should-not-trigger-", "no-trigger-")
_SHOULD_NOT_TRIGGER = re.compile(r"(?i)\bshould\s*n[o']t\s+(trigger|fire|activate|invoke|load|be\s+(used|triggered|"
                                 r"invoked|activated|loaded))\b|\bshould\s+not\s+use\s+(this|the)\s+skill\b")


def shape(data: Any, name: str) -> tuple[str | None, str]:
    """(shape, why) of a parsed eval file called `name`; shape None = not a shape the runner reads."""
    if isinstance(data, dict):
        if "evals" in data and _items_have(data["evals"], ("checks",)):
            return "skill-checks", "an object whose `evals` carry `checks` (skill_invoked)"
        if "cases" in data and name in ("evals.json", "trigger-evals.json") and (
                "skill" in data or _items_have(data["cases"], ("type", "expect", "expected_skill"))):
            return ("aegis-trigger" if name == "trigger-evals.json" else "aegis-evals"), "an object with `cases`"
        if "evals" in data and _items_have(data["evals"], ("should_trigger",)) and not _items_have(
                data["evals"], ("expectations", "assertions", "expected_output")):
            return "trigger-set", "an object whose `evals` are queries with should_trigger"
        if "evals" in data:
            return "skill-creator", "an object with `evals`"
        if "queries" in data or ("cases" in data and _items_have(data["cases"], ("should_trigger",))):
            return "trigger-set", "an object holding queries with should_trigger"
        if "cases" in data and _items_have(data["cases"], EXPECTED_KEYS + tuple(ROUTING_SPEC_KEYS)):
            return "routing", "an object whose `cases` name the skill expected or carry routing assertions"
        if "scenarios" in data or (("query" in data or "prompt" in data) and (
                "skills" in data or any(k in data for k in BEHAVIOUR_KEYS))):
            return "scenario", "a scenario (`query` with `skills` or `expected_behavior`)"
        return None, f"an object with keys {', '.join(sorted(map(str, data))[:8]) or '(none)'}"
    if isinstance(data, list):
        if not data:
            return None, "an empty list"
        if _items_have(data, ("checks",)) and _items_have(data, ("prompt", "query")):
            return "skill-checks", "a list of prompts with `checks` (skill_invoked)"
        if _items_have(data, ("should_trigger",)) and _items_have(data, ("query",)):
            return "trigger-set", "a list of queries with should_trigger"
        if _items_have(data, EXPECTED_KEYS):
            return "routing", "a list of prompts with the skill expected"
        if _items_have(data, tuple(ROUTING_SPEC_KEYS)) and not _items_have(
                data, ("expectations", "assertions", "expected_output") + BEHAVIOUR_KEYS):
            return "routing", "a list of prompts with routing assertions"
        if _items_have(data, ("skills",) + BEHAVIOUR_KEYS) and _items_have(data, ("query",)):
            return "scenario", "a list of scenarios"
        if _items_have(data, ("should_trigger",)) and not _items_have(data, ("expectations", "assertions")):
            return "trigger-set", "a list of prompts with should_trigger"
        if _items_have(data, ("prompt", "input")):
            return "skill-creator", "a list of eval items"
        return None, "a list whose items are not eval cases (no prompt, query or input)"
    return None, f"a JSON {type(data).__name__}, not an object or a list"


def _items_have(items: Any, keys: tuple[str, ...]) -> bool:
    return isinstance(items, list) and any(isinstance(i, dict) and any(k in i for k in keys) for i in items)


SCHEMA_OF = {
    "aegis-evals": schemas.AEGIS_EVALS, "aegis-trigger": schemas.AEGIS_TRIGGER,
    "skill-creator": schemas.SKILL_CREATOR_EVALS, "trigger-set": schemas.SKILL_CREATOR_TRIGGER_SET,
    "scenario": schemas.SCENARIO, "routing": schemas.ROUTING_SET, "skill-checks": schemas.SKILL_CHECKS,
}


def items(data: Any, the_shape: str) -> tuple[str | None, list[Any]]:
    """(the key holding the list of items, or None for a bare list / a single object; the items)."""
    if isinstance(data, list):
        return None, data
    if not isinstance(data, dict):
        return None, []
    keys = {"skill-creator": ("evals",), "trigger-set": ("queries", "evals", "cases"), "routing": ("cases",),
            "scenario": ("scenarios",), "aegis-evals": ("cases",), "aegis-trigger": ("cases",),
            "skill-checks": ("evals",)}[the_shape]
    for key in keys:
        if isinstance(data.get(key), list):
            return key, data[key]
    if the_shape == "scenario":
        return "", [data]  # one scenario: the object itself
    return None, []


# ---- one item ----------------------------------------------------------------------------------

@dataclass
class Item:
    """What one item of an eval file says, whatever the shape's spelling."""

    id: str | None
    prompt: str
    kind: LoadedKind = "trigger"
    kind_rule: str = ""
    assertions: list[tuple[str, str]] = field(default_factory=list)  # (text, key it came from)
    assertion_keys: list[tuple[Any, ...]] = field(default_factory=list)  # pointer of each, for its line
    expected_output: str | None = None
    files: list[str] = field(default_factory=list)
    target: str | None = None
    should_not_trigger: list[str] = field(default_factory=list)
    also_fire: list[str] = field(default_factory=list)
    note: str | None = None
    routing: RoutingSpec | None = None  # routing assertions (kind `routing`)
    # Where each name of `routing` is written (`routing.must/0` -> its pointer), for findings at their line.
    routing_where: dict[str, tuple[Any, ...]] = field(default_factory=dict)
    label: str | None = None  # a category tag written as `type` / `kind` (runner.corpus.tags)
    problem: str | None = None  # the item cannot be run as written (a finding, the case UNRUN)
    problem_at: tuple[Any, ...] | None = None  # the pointer of the value the problem is about (its line)


def item_id(raw: dict[str, Any], keys: tuple[str, ...]) -> str | None:
    for key in keys:
        value = raw.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool) and value != "":
            return str(value)
    return None


def _text(raw: dict[str, Any], keys: tuple[str, ...]) -> str:
    return next((raw[k] for k in keys if isinstance(raw.get(k), str) and raw[k].strip()), "")


def assertion_text(value: Any) -> str | None:
    """An assertion written as a string, or as an object (`text`, `description`, `name` or `value`)."""
    if isinstance(value, str):
        return value if value.strip() else None
    if not isinstance(value, dict):
        return None
    literal = value.get("value")
    if value.get("type") in ("content_contains", "contains") and isinstance(literal, str):
        return f"The answer contains `{literal}`."
    if value.get("type") in ("content_not_contains", "not_contains") and isinstance(literal, str):
        return f"The answer does not contain `{literal}`."
    return next((value[k] for k in ("text", "description", "name", "value")
                 if isinstance(value.get(k), str) and value[k].strip()), None)


def _assertions(raw: dict[str, Any], pointer: tuple[Any, ...], keys: tuple[str, ...]) -> tuple[list[tuple[str, str]],
                                                                                   list[tuple[Any, ...]]]:
    texts: list[tuple[str, str]] = []
    where: list[tuple[Any, ...]] = []
    for key in keys:
        value = raw.get(key)
        if isinstance(value, str) and value.strip():
            texts.append((value, key))
            where.append((*pointer, key))
        elif isinstance(value, list):
            for index, entry in enumerate(value):
                text = assertion_text(entry)
                if text is not None:
                    texts.append((text, key))
                    where.append((*pointer, key, index))
    return texts, where


def type_field(raw: dict[str, Any], wanted: object = None) -> tuple[LoadedKind | None, str, str | None]:
    """(kind or None, rule, label) from an item's `type` / `kind` (runner.corpus.tags): a kind it names, an
    unknown kind it misspells, or None with the category tag it is (the item's other fields decide)."""
    label = None
    for key in ("type", "kind"):
        value = raw.get(key)
        if not isinstance(value, str):
            continue
        reading = tags.read_type(value, TRIGGER_TYPES, NEGATIVE_TYPES)
        if reading.kind is not None:
            return ("no_trigger" if reading.kind == "no_trigger" else "trigger"), f"field:{key}={value}", None
        if reading.near is not None and wanted is not True:
            return "unknown", f"unknown-case-type:{key}={value}", None
        label = label or reading.label
    return None, "", label


def creator_kind(raw: dict[str, Any], case_id: str | None) -> tuple[LoadedKind, str]:
    """(kind, rule) of a skill-creator item: trigger unless something written says it is a negative control."""
    wanted = raw.get("should_trigger")
    if wanted is False:
        return "no_trigger", "field:should_trigger=false"
    kind, rule, _ = type_field(raw, wanted)
    if kind in ("no_trigger", "unknown"):
        return kind, rule
    if wanted is True:
        return "trigger", "field:should_trigger=true"
    if kind == "trigger":
        return "trigger", rule
    if case_id and case_id.lower().startswith(NEGATIVE_ID_PREFIXES):
        prefix = next(p for p in NEGATIVE_ID_PREFIXES if case_id.lower().startswith(p))
        return "no_trigger", f"id-prefix:{prefix}"
    expected = raw.get("expected_output")
    if isinstance(expected, str) and _SHOULD_NOT_TRIGGER.search(expected):
        return "no_trigger", "expected_output:should-not-trigger"
    return "trigger", "format:skill-creator"


def creator_item(raw: dict[str, Any], pointer: tuple[Any, ...], position: int) -> Item:
    case_id = item_id(raw, ("id", "eval_id")) or f"e{position + 1}"
    kind, rule = creator_kind(raw, case_id)
    texts, where = _assertions(raw, pointer, ("expectations", "assertions") + BEHAVIOUR_KEYS)
    files = [f for f in (raw.get("files") or raw.get("input_files") or []) if isinstance(f, str)] \
        if isinstance(raw.get("files") or raw.get("input_files"), list) else []
    expected = raw.get("expected_output") if isinstance(raw.get("expected_output"), str) else (
        raw.get("expected") if isinstance(raw.get("expected"), str) else None)
    name = _text(raw, ("eval_name", "name"))
    return Item(id=case_id, prompt=_text(raw, ("prompt", "input")), kind=kind, kind_rule=rule, assertions=texts,
                assertion_keys=where, expected_output=expected, files=files, note=name or None,
                label=type_field(raw)[2])


def trigger_item(raw: dict[str, Any], position: int) -> Item:
    wanted = raw.get("should_trigger")
    kind: LoadedKind = "trigger" if wanted is True else "no_trigger" if wanted is False else "invalid"
    return Item(id=item_id(raw, ("id",)) or f"q{position + 1}", prompt=_text(raw, ("query", "prompt")), kind=kind,
                kind_rule="format:trigger-set" if kind != "invalid" else "schema-invalid",
                note=raw.get("split") if isinstance(raw.get("split"), str) else None)


def scenario_item(raw: dict[str, Any], pointer: tuple[Any, ...], position: int, owner: str) -> Item:
    skills = [s for s in raw.get("skills", []) if isinstance(s, str) and s.strip()] \
        if isinstance(raw.get("skills"), list) else []
    target = owner if not skills or owner in skills else skills[0]
    texts, where = _assertions(raw, pointer, BEHAVIOUR_KEYS)
    files = [f for f in raw.get("files", []) if isinstance(f, str)] if isinstance(raw.get("files"), list) else []
    kind, rule, label = type_field(raw)
    return Item(id=item_id(raw, ("id", "name")) or str(position + 1), prompt=_text(raw, ("query", "prompt")),
                kind=kind or "trigger", kind_rule=rule or "format:scenario", assertions=texts, assertion_keys=where,
                files=files, target=target, also_fire=[s for s in skills if s != target], label=label)


def _names(value: Any) -> list[str] | None:
    """A skill name or a list of them; None when the value says nothing (absent or another type)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() and value.strip().lower() not in ("none", "null") else []
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return [v.strip() for v in value if v.strip()]
    return None


def routing_item(raw: dict[str, Any], position: int) -> Item:
    item = Item(id=item_id(raw, ("id",)) or f"r{position + 1}", prompt=_text(raw, ("prompt", "query")),
                kind="discrimination", kind_rule="format:routing")
    key = next((k for k in EXPECTED_KEYS if k in raw), None)
    # Routing assertions alone (no expected key) say which skills fire: read_routing makes the case of them.
    expected = _names(raw.get(key)) if key else ([] if has_routing(raw) else None)
    unexpected = next((_names(raw[k]) for k in UNEXPECTED_KEYS if k in raw), [])
    if expected is None:
        item.kind, item.kind_rule, item.problem = "invalid", "schema-invalid", f"`{key}` is not a skill name or list"
    elif len(expected) > 1:
        item.kind, item.kind_rule = "invalid", "routing-several-expected"
        item.problem = (f"`{key}` names {len(expected)} skills ({', '.join(expected)}); a routing case measures one "
                        "expected skill. Split it, or list the others as acceptable")
    elif not expected:
        item.kind, item.kind_rule = "no_trigger", "format:routing-expects-none"
    else:
        item.target = expected[0]
    item.should_not_trigger = unexpected or []
    if isinstance(raw.get("note") or raw.get("notes") or raw.get("rationale"), str):
        item.note = raw.get("note") or raw.get("notes") or raw.get("rationale")
    return item


def unused_keys(entries: list[Any], known: frozenset[str]) -> list[tuple[str, int]]:
    """(key, index of the first item using it) for keys no reader uses, in order of first use."""
    seen: dict[str, int] = {}
    for index, entry in enumerate(entries):
        if isinstance(entry, dict):
            for key in entry:
                if key not in known and key not in seen:
                    seen[str(key)] = index
    return list(seen.items())


# ---- skill-checks: cases that name the skill they check ------------------------------------------

def checks_owner(data: Any, names: dict[str, str]) -> str | None:
    """The skill a skill-checks file names for itself (`skill` / `skill_name` at its top), as the library names it;
    None when it names none of the library's."""
    if not isinstance(data, dict):
        return None
    named = next((data[k] for k in CHECKS_OWNER_KEYS if isinstance(data.get(k), str)), None)
    return names.get(named.strip()) if named else None


def checks_targets(data: Any, names: dict[str, str]) -> list[str]:
    """The library skills the items of a skill-checks file name in `checks.skill_invoked` (a name, not true/false)."""
    out: list[str] = []
    for raw in items(data, "skill-checks")[1]:
        checks = raw.get("checks") if isinstance(raw, dict) else None
        invoked = checks.get("skill_invoked") if isinstance(checks, dict) else None
        if isinstance(invoked, str) and invoked.strip() in names:
            out.append(names[invoked.strip()])
    return out


def checks_item(raw: dict[str, Any], position: int, owner: str | None, names: dict[str, str]) -> Item:
    """A skill-checks item: `skill_invoked` naming a skill makes a trigger case of that skill; true / false a trigger
    / no_trigger case of the file's skill (`owner`: its `evals/<skill>/` folder or its `skill` key)."""
    item = Item(id=item_id(raw, ("id", "name")) or f"c{position + 1}", prompt=_text(raw, ("prompt", "query")),
                target=owner)
    checks = raw.get("checks")
    invoked = checks.get("skill_invoked") if isinstance(checks, dict) else None
    if isinstance(invoked, str) and invoked.strip():
        name = invoked.strip()
        item.target = names.get(name, owner)
        item.kind_rule = f"field:checks.skill_invoked={name}"
        if name not in names:
            item.kind, item.kind_rule = "invalid", "schema-invalid"
            item.problem = f"checks.skill_invoked names {name!r}, which is not a skill of this library"
        return item
    if isinstance(invoked, bool) and owner is not None:
        item.kind = "trigger" if invoked else "no_trigger"
        item.kind_rule = f"field:checks.skill_invoked={str(invoked).lower()}"
        return item
    item.kind, item.kind_rule = "invalid", "schema-invalid"
    item.problem = ("checks.skill_invoked is " + str(invoked).lower() + " but the file names no skill it is about "
                    "(keep it in evals/<skill>/ or give it a `skill` key)" if isinstance(invoked, bool) else
                    "no checks.skill_invoked: the case says neither which skill should fire nor whether one should")
    return item


# ---- routing assertions (skill-up, waza) ---------------------------------------------------------

def has_routing(raw: dict[str, Any]) -> bool:
    """Whether an item carries routing assertions. `mode` alone is not one: it says how an order counts only beside
    the skills it orders, and another tool's `mode` means something else."""
    return any(key in raw for key in ROUTING_SPEC_KEYS if key != "mode")


def _routing_source(raw: dict[str, Any], pointer: tuple[Any, ...]) -> list[tuple[dict[str, Any], tuple[Any, ...]]]:
    """Where an item's routing keys are: its top, and skill-up's `routing_expect` object."""
    out = [(raw, pointer)]
    nested = raw.get(ROUTING_NEST)
    if isinstance(nested, dict):
        out.append((nested, (*pointer, ROUTING_NEST)))
    return out


def routing_spec(raw: dict[str, Any], pointer: tuple[Any, ...], own: str | None = None, routing_set: bool = False
                 ) -> tuple[RoutingSpec | None, dict[str, tuple[Any, ...]], str | None]:
    """(the spec, where each named skill is written, the problem that keeps it from being read) of an item with
    routing keys. `own`: the item's own skill, which `should_trigger: true` adds to the skills that must fire and
    `should_trigger: false` to those that must not. A value of the wrong type is a problem, never an exception (the
    schema's finding names its line as well). In a routing set (`routing_set`) the expected skill keys add to the
    skills that must fire and the unexpected ones to those that must not."""
    must: list[str] = []
    must_not: list[str] = []
    where: dict[str, tuple[Any, ...]] = {}
    settings: dict[str, Any] = {}
    for source, base in _routing_source(raw, pointer):
        parts = ((MUST_KEYS + (EXPECTED_KEYS if routing_set and source is raw else ()), must, "must"),
                 (MUST_NOT_KEYS + (UNEXPECTED_KEYS if routing_set and source is raw else ()), must_not, "must_not"))
        for keys, names, part in parts:
            for key in keys:
                if key not in source:
                    continue
                value = source[key]
                read = _names(value)
                if read is None:
                    return None, {"problem": (*base, key)}, f"`{key}` is not a skill name or a list of skill names"
                for position, name in enumerate(read):
                    if name not in names:
                        where[f"routing.{part}/{len(names)}"] = (*base, key, position) if isinstance(value, list) \
                            else (*base, key)
                        names.append(name)
        for key in ("allow_extra", "max_skills", "mode"):
            if key in source:
                settings[key] = source[key]
                where[f"routing.{key}"] = (*base, key)
    wanted = raw.get("should_trigger")
    if own and wanted is True and own not in must:
        must.append(own)
    if own and wanted is False and own not in must_not:
        must_not.append(own)
    allow_extra = settings.get("allow_extra", True)
    if not isinstance(allow_extra, bool):
        return None, {"problem": where["routing.allow_extra"]}, f"`allow_extra` is {allow_extra!r}, not true or false"
    max_skills = settings.get("max_skills")
    if max_skills is not None and (isinstance(max_skills, bool) or not isinstance(max_skills, int) or max_skills < 1):
        return None, {"problem": where["routing.max_skills"]}, (f"`max_skills` is {max_skills!r}, not a positive "
                                                                 "whole number")
    mode = settings.get("mode", "any_order")
    order = MODES.get(mode) if isinstance(mode, str) else None
    if order is None:
        return None, {"problem": where["routing.mode"]}, f"`mode` is {mode!r}; the runner reads {', '.join(MODES)}"
    if not must and not must_not and max_skills is None and allow_extra:
        # (`allow_extra: false` alone does say something: no library skill may fire.)
        return None, {}, "routing keys that name no skill and set no bound: nothing to check"
    return RoutingSpec(must_fire=must, must_not_fire=must_not, max_skills=max_skills, allow_extra=allow_extra,
                       order=order), where, None


def read_routing(item: Item, raw: dict[str, Any], pointer: tuple[Any, ...], own: str | None,
                 routing_set: bool = False) -> None:
    """Make an item with routing keys a `routing` case (rule `field:routing`): the author wrote which skills fire.
    Its target is the first skill that must fire, else its own skill (a library-level file has none: the loader
    gives it the library's)."""
    spec, where, problem = routing_spec(raw, pointer, own, routing_set)
    if spec is None:
        item.kind, item.kind_rule, item.problem = "invalid", "schema-invalid", problem
        item.problem_at = where.get("problem")
        return
    item.kind, item.kind_rule = "routing", "field:routing"
    item.routing, item.routing_where = spec, where
    item.target = spec.must_fire[0] if spec.must_fire else own
    item.should_not_trigger = []
