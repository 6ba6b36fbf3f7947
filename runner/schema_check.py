"""The JSON Schemas shipped in the package, and schema checks that point at the offending line."""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from runner.findings import Finding, error
from runner.jsonfile import JsonDocument

AEGIS_EVALS = "aegis-evals"
AEGIS_TRIGGER = "aegis-trigger-evals"
SKILL_CREATOR_EVALS = "skill-creator-evals"
SKILL_CREATOR_TRIGGER_SET = "skill-creator-trigger-set"
PROBE = "probe"

# A file that is wrong everywhere (random JSON) would otherwise print thousands of lines.
MAX_ERRORS_PER_FILE = 25


@lru_cache(maxsize=None)
def schema(name: str) -> dict[str, Any]:
    text = resources.files("runner").joinpath("schemas", f"{name}.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


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
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(err.schema.get("properties", {}))
        extra = sorted(k for k in err.instance if k not in allowed)
        if extra:
            return doc.line(*path, extra[0])
    return doc.line(*path)


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


def check(doc: JsonDocument, schema_name: str, shown: str, rule: str) -> tuple[list[Finding], set[tuple[Any, ...]]]:
    """Findings for every schema error, and the paths of the errors (to tell which cases are valid)."""
    findings: list[Finding] = []
    paths: set[tuple[Any, ...]] = set()
    errors = sorted(validator(schema_name).iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path)))
    for err in errors:
        paths.add(tuple(err.absolute_path))
        if len(findings) >= MAX_ERRORS_PER_FILE:
            continue
        special = special_rule(schema_name, err)
        rule_id, message = special if special else (rule, f"{_where(list(err.absolute_path))}: {err.message}")
        findings.append(error(rule_id, shown, _line(doc, err), message))
    if len(errors) > MAX_ERRORS_PER_FILE:
        findings.append(error(rule, shown, 1, f"{len(errors) - MAX_ERRORS_PER_FILE} more schema error(s) in this "
                                              f"file not shown; fix the ones above first"))
    return findings, paths
