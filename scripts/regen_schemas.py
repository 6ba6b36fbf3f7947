"""Regenerate the JSON Schemas shipped in runner/schemas from the pydantic models (tests check they match).

    python scripts/regen_schemas.py
"""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import TypeAdapter

from runner.corpus.settings import Settings
from runner.improve.model import Improve
from runner.judge.agreement import LabelledItem
from runner.results.build import Results

SCHEMAS = Path(__file__).resolve().parent.parent / "runner" / "schemas"


def write(name: str, schema: dict, title: str) -> None:
    schema["title"] = title
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    (SCHEMAS / name).write_text(json.dumps(schema, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def labels_schema() -> dict:
    """calibrate-judge's labels: a JSON list of items (the review mode's download); JSON Lines of the same items
    are also read, one item per line."""
    return TypeAdapter(list[LabelledItem]).json_schema()


if __name__ == "__main__":
    write("settings.schema.json", Settings.model_json_schema(by_alias=True), ".skill-evals.toml")
    write("results.schema.json", Results.model_json_schema(), "results.json")
    write("improve.schema.json", Improve.model_json_schema(), "improve.json")
    write("labels.schema.json", labels_schema(), "labels.json")
