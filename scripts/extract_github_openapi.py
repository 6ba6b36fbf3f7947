#!/usr/bin/env python3
"""Extract, from GitHub's published OpenAPI description, the operations skill-evals calls: the contract its tests hold.

Why: the publish tests talk to a fake GitHub (runner/testing/fake_github.py). A fake that accepts whatever we send
proves nothing, so it validates every request against GitHub's own description of the operation (path and
query parameters, request body schema) and answers 422 like GitHub when a request breaks it. The full
description is 13 MB; the tests must run on a fresh clone without network, so the few operations we use,
and every component they reference (transitively), are vendored in runner/testing/contracts/github-openapi-subset.json.
tests/test_github_contract.py re-extracts them from the pinned package and fails if the vendored file drifted.

Source: the npm package @octokit/openapi (MIT, Copyright (c) 2020 Octokit contributors; its LICENSE is
vendored beside the subset), file generated/api.github.com.json, which is GitHub's github/rest-api-description
with Octokit's `x-octokit` extension.

    npm install --prefix ~/.cache/skill-evals-openapi @octokit/openapi@23.0.2
    python scripts/extract_github_openapi.py \\
        ~/.cache/skill-evals-openapi/node_modules/@octokit/openapi/generated/api.github.com.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

PACKAGE = "@octokit/openapi"
VERSION = "23.0.2"
DESCRIPTION_FILE = "generated/api.github.com.json"
COPYRIGHT = "Copyright (c) 2020 Octokit contributors"
TARGET = Path(__file__).resolve().parent.parent / "runner" / "testing" / "contracts" / "github-openapi-subset.json"

# (method, path template): what runner.publish.github sends through PyGithub, and what the fake answers.
OPERATIONS: tuple[tuple[str, str], ...] = (
    ("get", "/repos/{owner}/{repo}"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}"),
    ("get", "/repos/{owner}/{repo}/commits/{ref}/check-runs"),
    ("post", "/repos/{owner}/{repo}/check-runs"),
    ("get", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("patch", "/repos/{owner}/{repo}/check-runs/{check_run_id}"),
    ("get", "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}"),
    ("get", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("post", "/repos/{owner}/{repo}/issues/{issue_number}/comments"),
    ("get", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("patch", "/repos/{owner}/{repo}/issues/comments/{comment_id}"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}"),
    # The description suggestion of `publish --improve` (runner.publish.suggestion): the PR's files (is the line in
    # its diff?), its review comments (ours, found by marker), one created or edited in place.
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/files"),
    ("get", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("post", "/repos/{owner}/{repo}/pulls/{pull_number}/comments"),
    ("get", "/repos/{owner}/{repo}/pulls/comments/{comment_id}"),
    ("patch", "/repos/{owner}/{repo}/pulls/comments/{comment_id}"),
)
# What of an operation a request is checked against (responses are what the fake answers, not checked here).
KEPT = ("operationId", "parameters", "requestBody")


def _refs(value: Any) -> list[str]:
    """Every local `$ref` inside a JSON value."""
    if isinstance(value, dict):
        found = [value["$ref"]] if isinstance(value.get("$ref"), str) else []
        return found + [ref for item in value.values() for ref in _refs(item)]
    if isinstance(value, list):
        return [ref for item in value for ref in _refs(item)]
    return []


def _component(description: dict[str, Any], ref: str) -> tuple[str, str, Any]:
    parts = ref.split("/")
    if len(parts) != 4 or parts[:2] != ["#", "components"]:
        raise ValueError(f"a $ref outside #/components/<kind>/<name>: {ref}")
    return parts[2], parts[3], description["components"][parts[2]][parts[3]]


def extract(description: dict[str, Any]) -> dict[str, Any]:
    """The subset: the operations of OPERATIONS (KEPT keys, and their path item's parameters) and, transitively,
    every component they reference. Deterministic (sorted), so a re-extraction compares equal."""
    version = (description.get("info") or {}).get("version")
    if version != VERSION:
        raise ValueError(f"the description is version {version!r}, not {VERSION}: install {PACKAGE}@{VERSION}")
    paths: dict[str, dict[str, Any]] = {}
    for method, template in OPERATIONS:
        item = description["paths"][template]
        operation = {key: item[method][key] for key in KEPT if key in item[method]}
        if "parameters" in item:
            operation["x-path-parameters"] = item["parameters"]
        paths.setdefault(template, {})[method] = operation
    components: dict[str, dict[str, Any]] = {}
    pending = _refs(paths)
    while pending:
        kind, name, value = _component(description, pending.pop())
        if name in components.get(kind, {}):
            continue
        components.setdefault(kind, {})[name] = value
        pending += _refs(value)
    return {
        "x-source": {"package": f"{PACKAGE}@{VERSION}", "file": DESCRIPTION_FILE, "license": "MIT",
                     "copyright": COPYRIGHT, "license_file": "github-openapi-subset.LICENSE",
                     "extracted_by": "scripts/extract_github_openapi.py",
                     "note": "The operations skill-evals calls, from GitHub's REST description as published by "
                             "Octokit; do not edit by hand: re-run the script."},
        "openapi": description["openapi"],
        "info": {"title": description["info"]["title"], "version": version},
        "paths": paths,
        "components": components,
    }


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def render(subset: dict[str, Any]) -> str:
    """The file's text: keys sorted, except that the source and its license come first, where a reader looks."""
    ordered = _sorted(subset)
    header = {"x-source": ordered.pop("x-source")}
    return json.dumps({**header, **ordered}, indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) not in (2, 3):
        print(f"usage: {Path(argv[0]).name} API_GITHUB_COM_JSON [OUT]", file=sys.stderr)
        return 2
    description = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    out = Path(argv[2]) if len(argv) == 3 else TARGET
    out.write_text(render(extract(description)), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
