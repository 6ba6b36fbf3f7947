"""The JSON Schemas shipped in the package, and schema checks that point at the offending line."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from functools import lru_cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match

from runner.corpus.findings import Finding, error
from runner.corpus.jsonfile import JsonDocument

AEGIS_EVALS = "aegis-evals"
AEGIS_TRIGGER = "aegis-trigger-evals"
SKILL_CREATOR_EVALS = "skill-creator-evals"
SKILL_CREATOR_TRIGGER_SET = "skill-creator-trigger-set"
SCENARIO = "scenario"
ROUTING_SET = "routing-set"
SKILL_CHECKS = "skill-checks"
PROBE = "probe"

# A file that is wrong everywhere (random JSON) would otherwise print thousands of lines.
MAX_ERRORS_PER_FILE = 25


@lru_cache(maxsize=None)
def schema(name: str) -> dict[str, Any]:
    text = resources.files("runner").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


@lru_cache(maxsize=None)
def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(schema(name))


def _where(path: list[Any]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _line(doc: JsonDocument, err: ValidationError) -> int:
    path = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict) and isinstance(err.schema, Mapping):
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(k for k in err.instance if k not in allowed)
        if extra:
            return doc.line(*path, extra[0])
    return doc.line(*path)


def _short(value: Any) -> str:
    """The offending value, quoted short enough to read in one line (never the whole file)."""
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _expand(err: ValidationError) -> list[ValidationError]:
    """For a value that matched none of several shapes: the errors of the one shape its type fits (an
    object is not told it should have been a list), unless every shape only asked for a key (the error
    itself, read by `_message` as "needs one of"). Several shapes fit: the best match of them."""
    if err.validator not in ("anyOf", "oneOf") or not err.context:
        return [err]
    if all(sub.validator == "required" for sub in err.context):
        return [err]
    shapes: dict[Any, list[ValidationError]] = {}
    for sub in err.context:
        shapes.setdefault(sub.schema_path[0] if sub.schema_path else None, []).append(sub)
    fitting = [subs for subs in shapes.values()
               if not any(sub.validator == "type" and not sub.relative_path for sub in subs)]
    if len(fitting) == 1:
        return [leaf for sub in fitting[0] for leaf in _expand(sub)]
    if fitting:
        return _expand(best_match([sub for subs in fitting for sub in subs]))
    return [err]


def _listed(value: object) -> list[Any]:
    """The value of a `required` or `enum` keyword: a list (the schemas shipped here are valid)."""
    return value if isinstance(value, list) else []


def _message(err: ValidationError) -> str:
    where = _where(list(err.absolute_path))
    if err.validator in ("anyOf", "oneOf") and err.context and all(s.validator == "required" for s in err.context):
        keys = sorted({key for sub in err.context for key in _listed(sub.validator_value)})
        return f"{where}: needs one of the keys {', '.join(repr(k) for k in keys)}"
    if err.validator == "type":
        return f"{where}: expected {' or '.join(err.validator_value) if isinstance(err.validator_value, list) else err.validator_value}, got {_short(err.instance)}"
    if err.validator == "enum":
        return f"{where}: {_short(err.instance)} is not one of {', '.join(map(_short, _listed(err.validator_value)))}"
    if err.validator == "minLength":
        return f"{where}: must not be empty"
    if err.validator in ("anyOf", "oneOf", "not"):
        return f"{where}: {_short(err.instance)} is none of the shapes this file format allows"
    message = err.message if len(err.message) <= 200 else err.message[:197] + "..."
    return f"{where}: {message}"


def special_rule(schema_name: str, err: ValidationError) -> tuple[str, str] | None:
    """Schema errors that deserve their own rule id and a message in the corpus's own words."""
    path = list(err.absolute_path)
    if schema_name == AEGIS_EVALS and err.validator == "enum" and path[-1:] == ["type"] and "cases" in path:
        known = ", ".join(schema(AEGIS_EVALS)["properties"]["cases"]["items"]["properties"]["type"]["enum"])
        return ("unknown-case-type",
                f"{_where(path)}: unknown case type {err.instance!r} (known: {known}); the case is not run "
                "(UNRUN unknown-case-type) until its type is fixed or the runner learns the type")
    if schema_name == PROBE and err.validator == "enum" and path[-1:] == ["shape"] and err.instance == "time_pressure":
        return ("probe-time-pressure-shape",
                f"{_where(path)}: time_pressure is a modifier, never a shape (seed 000 shape 4): use a shape "
                "(buried, euphemized, structural) and list time_pressure under `modifiers`")
    return None


def check(doc: JsonDocument, schema_name: str, shown: str, rule: str,
          case_at: Callable[[tuple[Any, ...]], str | None] | None = None) -> tuple[list[Finding], set[tuple[Any, ...]]]:
    """Findings for every schema error, and the paths of the errors (to tell which cases are valid).
    `case_at` names the case (uid) an error path is inside, if any: such a finding is about that case only."""
    findings: list[Finding] = []
    paths: set[tuple[Any, ...]] = set()
    errors = sorted(validator(schema_name).iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path)))
    for err in [leaf for top in errors for leaf in _expand(top)]:
        paths.add(tuple(err.absolute_path))
        if len(findings) >= MAX_ERRORS_PER_FILE:
            continue
        special = special_rule(schema_name, err)
        rule_id, message = special if special else (rule, _message(err))
        findings.append(error(rule_id, shown, _line(doc, err), message,
                              uid=case_at(tuple(err.absolute_path)) if case_at else None))
    if len(paths) > MAX_ERRORS_PER_FILE:
        findings.append(error(rule, shown, 1, f"{len(paths) - MAX_ERRORS_PER_FILE} more schema error(s) in this "
                                              f"file not shown; fix the ones above first"))
    return findings, paths
