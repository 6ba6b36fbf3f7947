#!/usr/bin/env python3
"""Structural validator for this example skill library (stdlib only).

For every skill folder under .claude/skills (skipping "_*"): frontmatter name ==
folder, non-empty description (MANUAL-ONLY sentinel when manual-only), the nine
sections in order, body < 500 lines, evals/evals.json parses, and
evals/trigger-evals.json parses when present. Prints `ERROR <path>: <message>`
and exits 1, else `OK: N skill(s) valid, M warning(s)`. Paths resolve from this file.
"""
import json
import sys
from pathlib import Path

LIBRARY_ROOT = Path(__file__).resolve().parent.parent
SKILLS_DIR = LIBRARY_ROOT / ".claude" / "skills"
SENTINEL = "MANUAL-ONLY; never auto-invoke. "
MAX_BODY_LINES = 500
MAX_DESCRIPTION = 1024
REQUIRED_SECTIONS = [
    "Purpose", "Use When", "Inputs to Inspect", "Workflow", "Output Format",
    "Validation Checklist", "Gotchas", "Stop Conditions", "Supporting Files",
]


def parse_scalar(raw):
    """One-line YAML scalar: plain, 'single-quoted' ('' escapes ') or "double"."""
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == raw[-1] == "'":
        return raw[1:-1].replace("''", "'")
    if len(raw) >= 2 and raw[0] == raw[-1] == '"':
        return json.loads(raw)
    return raw


def split_frontmatter(text):
    """Return (fields, body) or (None, error message)."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        return None, "SKILL.md does not start with a --- frontmatter block"
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        return None, "frontmatter block is not closed with ---"
    fields = {}
    for line in lines[1:end]:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep or line[0].isspace():
            return None, f"frontmatter line is not a one-line 'key: value': {line[:60]!r}"
        try:
            fields[key.strip()] = parse_scalar(value)
        except ValueError as exc:
            return None, f"cannot parse frontmatter field {key.strip()!r}: {exc}"
    return fields, "\n".join(lines[end + 1:])


def check_skill(folder, errors, warnings):
    rel = lambda p: p.relative_to(LIBRARY_ROOT).as_posix()
    skill_md = folder / "SKILL.md"
    if not skill_md.is_file():
        errors.append(f"{rel(folder)}: SKILL.md is missing")
        return
    fields, body = split_frontmatter(skill_md.read_text(encoding="utf-8"))
    if fields is None:
        errors.append(f"{rel(skill_md)}: {body}")
        return
    if fields.get("name") != folder.name:
        errors.append(f"{rel(skill_md)}: name {fields.get('name')!r} does not equal folder {folder.name!r}")
    description = fields.get("description", "")
    if not description:
        errors.append(f"{rel(skill_md)}: description is missing or empty")
    elif len(description) > MAX_DESCRIPTION:
        warnings.append(f"{rel(skill_md)}: description is {len(description)} characters (> {MAX_DESCRIPTION})")
    if fields.get("disable-model-invocation") == "true" and not description.startswith(SENTINEL):
        errors.append(f"{rel(skill_md)}: manual-only skill description must start with {SENTINEL!r}")
    body_lines = body.splitlines()
    if len(body_lines) >= MAX_BODY_LINES:
        errors.append(f"{rel(skill_md)}: body has {len(body_lines)} lines (limit {MAX_BODY_LINES})")
    headers = [l[3:].strip() for l in body_lines if l.startswith("## ")]
    found = [h for h in headers if h in REQUIRED_SECTIONS]
    missing = [s for s in REQUIRED_SECTIONS if s not in found]
    if missing:
        errors.append(f"{rel(skill_md)}: missing section(s): {', '.join(missing)}")
    elif found != REQUIRED_SECTIONS:
        errors.append(f"{rel(skill_md)}: required sections are out of order")
    for name, required in (("evals.json", True), ("trigger-evals.json", False)):
        path = folder / "evals" / name
        if not path.is_file():
            if required:
                errors.append(f"{rel(folder)}: evals/{name} is missing")
            elif fields.get("disable-model-invocation") != "true":
                warnings.append(f"{rel(folder)}: no evals/{name} (fine only if the skill overlaps no other)")
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as exc:
            errors.append(f"{rel(path)}: does not parse as JSON: {exc}")
            continue
        if not isinstance(data, dict) or not isinstance(data.get("cases"), list):
            errors.append(f"{rel(path)}: expected an object with a 'cases' list")


def main():
    errors, warnings = [], []
    if not SKILLS_DIR.is_dir():
        print(f"ERROR {SKILLS_DIR}: skills folder not found")
        return 1
    folders = sorted(p for p in SKILLS_DIR.iterdir() if p.is_dir() and not p.name.startswith("_"))
    for folder in folders:
        check_skill(folder, errors, warnings)
    for message in warnings:
        print(f"WARNING {message}")
    if errors:
        for message in errors:
            print(f"ERROR {message}")
        return 1
    print(f"OK: {len(folders)} skill(s) valid, {len(warnings)} warning(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
