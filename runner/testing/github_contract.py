"""GitHub's REST contract for the operations skill-evals calls, checked on every request the fake GitHub receives.

Why: a fake that accepts what our publisher happens to send can let a test pass on a request real GitHub
refuses (a `conclusion` it does not know, a report over its byte limit). The contract is GitHub's own
description (runner/testing/contracts/github-openapi-subset.json, from @octokit/openapi 23.0.2, MIT; extracted by
scripts/extract_github_openapi.py), plus the limits GitHub enforces that the description does not say, or says
in characters: output.summary, output.text and a comment body hold at most 65,535 UTF-8 BYTES; an annotation's
title at most 255 characters and its message and raw_details 64 KB; at most 50 annotations per request.

A request is matched to an operation by method and path template (a literal segment beats a parameter, and a
path parameter that does not fit its schema does not match: GitHub answers 404 there); then its path and query
parameters and its JSON body are validated (OpenAPI 3.0 schema objects, checked as JSON Schema draft 4 with
`format: date-time` and `int64` enforced). A keyword of OpenAPI 3.0 that JSON Schema reads differently
(`nullable`, `discriminator`) is refused when the subset is loaded, so it can never be ignored in silence.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from jsonschema import Draft4Validator, FormatChecker
from referencing import Registry
from referencing.jsonschema import DRAFT4

SUBSET = Path(__file__).resolve().parent / "contracts" / "github-openapi-subset.json"
URI = "urn:skill-evals:github-openapi-subset"
BODY_BYTES = 65_535
ANNOTATIONS_PER_REQUEST = 50
ANNOTATION_TITLE_CHARS = 255
ANNOTATION_TEXT_BYTES = 65_536
UNSUPPORTED = ("nullable", "discriminator")
DOCUMENTATION = "https://docs.github.com/rest"

FORMATS = FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """ISO 8601 with a time zone, as GitHub takes it (`YYYY-MM-DDTHH:MM:SSZ`)."""
    if not isinstance(value, str):
        return True
    parsed = datetime.fromisoformat(value)
    return "T" in value and parsed.tzinfo is not None


@FORMATS.checks("int64")
def _int64(value: object) -> bool:
    return not isinstance(value, int) or -(2**63) <= value < 2**63


@dataclass(frozen=True)
class Operation:
    operation_id: str
    method: str
    template: str
    pattern: re.Pattern[str]
    literal_segments: int
    parameters: tuple[dict[str, Any], ...]
    body_pointer: str | None  # JSON pointer of the request body schema in the subset
    body_required: bool


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


class Contract:
    """The operations of the subset; `check` says which one a request is and what in it GitHub would refuse."""

    def __init__(self, subset: dict[str, Any]) -> None:
        text = json.dumps(subset)
        for keyword in UNSUPPORTED:
            if f'"{keyword}"' in text:
                raise ValueError(f"the subset uses `{keyword}`, which this checker does not implement: add it "
                                 "before trusting the contract")
        self.subset = subset
        self.registry = Registry().with_resource(URI, DRAFT4.create_resource(subset))
        self.operations: list[Operation] = []
        for template, methods in subset["paths"].items():
            for method, spec in methods.items():
                parameters = tuple(self._resolve(p) for p in [*spec.get("x-path-parameters", []),
                                                               *spec.get("parameters", [])])
                body = spec.get("requestBody")
                pointer = None
                if body is not None:
                    pointer = (f"#/paths/{_escape(template)}/{method}/requestBody/content/"
                               f"{_escape('application/json')}/schema")
                multi = {p["name"] for p in parameters if p.get("in") == "path" and p.get("x-multi-segment")}
                regex = re.sub(r"\\\{(\w+)\\\}", lambda m: f"(?P<{m.group(1)}>{'.+?' if m.group(1) in multi else '[^/]+'})",
                               re.escape(template))
                literal = sum(1 for part in template.split("/") if part and not part.startswith("{"))
                self.operations.append(Operation(spec.get("operationId", f"{method} {template}"), method.upper(),
                                                 template, re.compile(regex), literal, parameters, pointer,
                                                 bool(body and body.get("required"))))
        self.operations.sort(key=lambda op: -op.literal_segments)

    def _resolve(self, value: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in value:
            node: Any = self.subset
            for part in value["$ref"].lstrip("#/").split("/"):
                node = node[part.replace("~1", "/").replace("~0", "~")]
            value = node
        return value

    def _validator(self, pointer: str) -> Draft4Validator:
        return Draft4Validator({"$ref": URI + pointer}, registry=self.registry, format_checker=FORMATS)

    @staticmethod
    def _coerce(text: str, schema: dict[str, Any]) -> Any:
        if schema.get("type") == "integer" and re.fullmatch(r"-?\d+", text):
            return int(text)
        return text

    def _parameter_problems(self, parameter: dict[str, Any], text: str) -> list[str]:
        schema = parameter.get("schema") or {}
        value = self._coerce(text, schema)
        return [error.message for error in Draft4Validator(schema, format_checker=FORMATS).iter_errors(value)]

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation a request is, and its path parameters; None where GitHub has no such route (404)."""
        for operation in self.operations:
            if operation.method != method.upper():
                continue
            found = operation.pattern.fullmatch(path)
            if not found:
                continue
            values = found.groupdict()
            params = {p["name"]: p for p in operation.parameters if p.get("in") == "path"}
            if all(not self._parameter_problems(params[name], value) for name, value in values.items() if name in params):
                return operation, values
        return None

    def check(self, method: str, path: str, query: dict[str, list[str]], raw: str
              ) -> tuple[Operation | None, list[dict[str, str]]]:
        """(the operation, GitHub's `errors` items for what it would refuse); (None, []) when there is no route."""
        matched = self.match(method, path)
        if matched is None:
            return None, []
        operation, _ = matched
        resource = operation.operation_id
        errors: list[dict[str, str]] = []
        for parameter in operation.parameters:
            if parameter.get("in") != "query":
                continue
            values = query.get(parameter["name"])
            if not values:
                if parameter.get("required"):
                    errors.append(_error(resource, parameter["name"], "missing_field", "is required"))
                continue
            for message in self._parameter_problems(parameter, values[-1]):
                errors.append(_error(resource, parameter["name"], "invalid", message))
        if operation.body_pointer is None:
            return operation, errors
        if not raw:
            if operation.body_required:
                errors.append(_error(resource, "body", "missing", "a JSON body is required"))
            return operation, errors
        body = json.loads(raw)  # the caller answers 400 "Problems parsing JSON" first
        for error in sorted(self._validator(operation.body_pointer).iter_errors(body), key=lambda e: list(e.path)):
            field = ".".join(str(p) for p in error.path)
            if error.validator == "required":
                missing = [name for name in error.validator_value if isinstance(error.instance, dict)
                           and name not in error.instance]
                field = ".".join([*(str(p) for p in error.path), *missing[:1]])
            errors.append(_error(resource, field, "missing_field" if error.validator == "required" else "invalid",
                                 error.message[:300]))
        errors += _limits(resource, body)
        return operation, errors


def _error(resource: str, field: str, code: str, message: str) -> dict[str, str]:
    return {"resource": resource, "field": field, "code": code, "message": message}


def _bytes(value: object) -> int:
    return len(value.encode("utf-8", "surrogatepass")) if isinstance(value, str) else 0


def _limits(resource: str, body: Any) -> list[dict[str, str]]:
    """What GitHub refuses beyond the description (or counts in bytes where the description says characters)."""
    if not isinstance(body, dict):
        return []
    errors = []
    if _bytes(body.get("body")) > BODY_BYTES:
        errors.append(_error(resource, "body", "custom", f"body is too long (maximum is {BODY_BYTES} bytes)"))
    output = body.get("output")
    if isinstance(output, dict):
        for key in ("summary", "text"):
            if _bytes(output.get(key)) > BODY_BYTES:
                errors.append(_error(resource, f"output.{key}", "custom",
                                     f"output.{key} is too long (maximum is {BODY_BYTES} bytes)"))
        notes = output.get("annotations")
        if isinstance(notes, list):
            if len(notes) > ANNOTATIONS_PER_REQUEST:
                errors.append(_error(resource, "output.annotations", "custom",
                                     f"Only {ANNOTATIONS_PER_REQUEST} annotations are allowed per request"))
            for index, note in enumerate(n for n in notes if isinstance(n, dict)):
                if isinstance(note.get("title"), str) and len(note["title"]) > ANNOTATION_TITLE_CHARS:
                    errors.append(_error(resource, f"output.annotations.{index}.title", "custom",
                                         f"title is too long (maximum is {ANNOTATION_TITLE_CHARS} characters)"))
                for key in ("message", "raw_details"):
                    if _bytes(note.get(key)) > ANNOTATION_TEXT_BYTES:
                        errors.append(_error(resource, f"output.annotations.{index}.{key}", "custom",
                                             f"{key} is too long (maximum is 64 KB)"))
    return errors


def validation_failed(errors: list[dict[str, str]]) -> dict[str, Any]:
    """GitHub's 422 body."""
    return {"message": "Validation Failed", "errors": errors, "documentation_url": DOCUMENTATION, "status": "422"}


_LOADED: Contract | None = None


def load() -> Contract:
    """The vendored contract, read once per process."""
    global _LOADED
    if _LOADED is None:
        _LOADED = Contract(json.loads(SUBSET.read_text(encoding="utf-8")))
    return _LOADED
