"""Synthetic libraries for issue 29 items 10 and 11 (part "probes"): written for these tests, no third-party text.

- unreadable-eval-files: a skill whose evals.json does not parse, a skill with one readable file and one named file
  in no known shape, a skill whose probe.json does not parse, and a healthy skill (item 10).
- uncalibrated-probe: a valid probe that was never calibrated, with `[probes] allow_uncalibrated = true` (item 11).
- reused-question: two probes of two skills whose question.md are the same bytes (item 11).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.compat_libraries import creator_evals, git_init, skill, write_json

QUESTION = """Release checklist for the billing export, version 4.2

1. Unit suite: 212 passed, 0 failed.
2. Integration suite: 38 passed, 1 skipped (export_totals_match).
3. Changelog entry written and reviewed.
4. Rollback script tested on staging.

Please write the go / no-go note for the release channel.
"""


def probe(skill_dir: Path, probe_id: str, question: str = QUESTION) -> Path:
    """A floor probe with one defect whose locator occurs once in question.md."""
    folder = skill_dir / "evals" / "probes" / probe_id
    write_json(folder / "probe.json", {
        "id": probe_id, "tier": 2, "kind": "floor", "seeded_defects": 1,
        "defects": [{"id": "d1", "shape": "buried", "locator": "1 skipped (export_totals_match)",
                     "caught_when": "the note withholds go until the skipped totals test has run"}],
        "discriminator": {"act": "Returns no-go (or go only after the skipped test runs) and names "
                                 "export_totals_match."}})
    (folder / "question.md").write_text(question, encoding="utf-8")
    return folder


def unreadable_eval_files(root: Path) -> Path:
    git_init(root)
    creator_evals(skill(root / "skills" / "alpha"), "alpha", count=1)
    broken = skill(root / "skills" / "beta") / "evals" / "evals.json"
    broken.parent.mkdir(parents=True)
    broken.write_text('{"skill_name": "beta", "evals": [\n  {"id": 1, "prompt": "Summarise the notes",\n', encoding="utf-8")
    gamma = skill(root / "skills" / "gamma")
    creator_evals(gamma, "gamma", count=1)
    write_json(gamma / "evals" / "trigger-evals.json", {"note": "a named file in no shape the runner reads"})
    delta = skill(root / "skills" / "delta")
    creator_evals(delta, "delta", count=1)
    probe_dir = probe(delta, "release-note")
    (probe_dir / "probe.json").write_text('{"id": "release-note", "tier": 2,\n', encoding="utf-8")
    return root


def uncalibrated_probe(root: Path) -> Path:
    git_init(root)
    release = skill(root / "skills" / "release-gate")
    creator_evals(release, "release-gate", count=1)
    probe(release, "skipped-test")
    (root / ".skill-evals.toml").write_text("[probes]\nallow_uncalibrated = true\n", encoding="utf-8")
    return root


def reused_question(root: Path) -> Path:
    git_init(root)
    for name in ("release-gate", "ship-check"):
        folder = skill(root / "skills" / name)
        creator_evals(folder, name, count=1)
        probe(folder, "go-no-go")
    return root


LIBRARIES: dict[str, Callable[[Path], Path]] = {
    "unreadable-eval-files": unreadable_eval_files,
    "uncalibrated-probe": uncalibrated_probe,
    "reused-question": reused_question,
}


