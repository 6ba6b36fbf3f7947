"""The census's listing estimate against the listing the real CLI sends (the surface audit).

Each library here is synthetic text. The estimate must equal the measurement exactly: which
library skills keep their description, which are listed by name only, and the listing's size.
A mismatch after a CLI update means runner/data/host_listing.json (the host's own entries) or
the rule in runner/hosts/listing.py must be measured again.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from runner.hosts.claude_code import bundled_cli, cli_version
from runner.hosts.listing import collation_key, host_listing
from tests.conftest import cli, run_cli

WORDS = ("ledger queue cache schema budget review audit rollout token index stream plan triage deploy "
         "incident backfill contract tenant quota signal").split()


def _sentence(rng: random.Random, length: int) -> str:
    words: list[str] = []
    while len(" ".join(words)) < length:
        words.append(rng.choice(WORDS))
    return " ".join(words)[:length].rstrip() + "."


def _skill(root: Path, folder: str, frontmatter: dict[str, object], body: str = "") -> None:
    target = root / ".claude" / "skills" / folder
    target.mkdir(parents=True)
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in frontmatter.items()]
    (target / "SKILL.md").write_text("---\n" + "\n".join(lines) + "\n---\n\n" + (body or f"# {folder}\n\nSteps.\n"),
                                     encoding="utf-8")


def mixed_lengths(root: Path) -> None:
    """Long and short descriptions alternate: a shorter later skill fits after a longer one did not."""
    rng = random.Random(7)
    for index, length in enumerate([420, 60, 950, 130, 35, 700, 90, 260, 1300, 45, 510, 75]):
        name = f"{rng.choice(WORDS)}-{rng.choice(WORDS)}-{index}"
        _skill(root, name, {"name": name, "description": _sentence(rng, length)})


def many_short(root: Path) -> None:
    """Sixty skills: their names alone take a good part of the budget."""
    rng = random.Random(11)
    for index in range(60):
        name = f"{WORDS[index % len(WORDS)]}-{WORDS[(index * 7) % len(WORDS)]}-{index}"
        _skill(root, name, {"name": name, "description": _sentence(rng, 60 + (index * 37) % 140)})


def quirks(root: Path) -> None:
    """What the CLI derives or rewrites: when_to_use, a body line as description, angle brackets,
    wide characters, a description past the 1,536-character cap, locale order, manual-only."""
    rng = random.Random(13)
    _skill(root, "alpha-quota", {"name": "alpha-quota", "description": _sentence(rng, 200),
                                 "when_to_use": "When a <tenant> asks about " + _sentence(rng, 60)})
    _skill(root, "body-derived", {"name": "body-derived"}, "\n## Derive the ledger summary\n\nSteps.\n")
    _skill(root, "wide-ledger", {"name": "wide-ledger", "description": "台帳の照合 " + _sentence(rng, 120)})
    _skill(root, "over-cap", {"name": "over-cap", "description": _sentence(rng, 1700)})
    _skill(root, "multi-line", {"name": "multi-line", "description": "First line.\n\nSecond\tline " + _sentence(rng, 90)})
    _skill(root, "manual-rollout", {"name": "manual-rollout", "description": _sentence(rng, 300),
                                    "disable-model-invocation": True})
    for folder in ("s9", "s10", "s_under", "s-dash", "Upper-case"):
        _skill(root, folder, {"name": folder, "description": _sentence(rng, 150)})


LIBRARIES = {"mixed-lengths": mixed_lengths, "many-short": many_short, "quirks": quirks}
CASES = [("mixed-lengths", None), ("mixed-lengths", 9_000), ("many-short", None), ("many-short", 12_000),
         ("quirks", 7_900), ("quirks", 250_000)]


def _library(tmp_path: Path, shape: str, budget: int | None) -> tuple[Path, Path]:
    root = tmp_path / shape
    LIBRARIES[shape](root)
    (root / ".git").mkdir()
    config = tmp_path / "settings.toml"
    config.write_text(f"[listing]\nbudget_chars = {budget}\n" if budget else "", encoding="utf-8")
    return root, config


@pytest.mark.parametrize(("shape", "budget"), CASES)
def test_estimate_equals_the_captured_listing(tmp_path: Path, shape: str, budget: int | None) -> None:
    root, config = _library(tmp_path, shape, budget)
    done = run_cli("surface", "--library", str(root), "--config", str(config), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    measured = json.loads(done.stdout)
    census = cli("census", "--library", str(root), "--config", str(config), "--format", "json")
    assert census.exit_code == 0, census.output
    estimated = json.loads(census.output)["listing"]
    assert estimated["with_description"] == measured["with_description"]
    assert estimated["name_only"] == measured["name_only"]
    assert estimated["estimated_listing_chars"] == measured["listing_chars"]
    assert measured["missing"] == []
    if (shape, budget) in (("mixed-lengths", None), ("many-short", None), ("quirks", 7_900)):
        # The cases are chosen to be partial, where the rule decides something.
        assert measured["with_description"] and measured["name_only"]


def test_a_shorter_skill_fits_after_a_longer_one_did_not(tmp_path: Path) -> None:
    root, config = _library(tmp_path, "mixed-lengths", None)
    listing = json.loads(cli("census", "--library", str(root), "--config", str(config), "--format", "json").output)[
        "listing"]
    order = sorted(listing["with_description"] + listing["name_only"], key=collation_key)
    first_dropped = min(order.index(name) for name in listing["name_only"])
    assert any(order.index(name) > first_dropped for name in listing["with_description"])
    assert listing["host_entries"] and listing["host_fixed_chars"] > 0


def test_host_entries_were_measured_with_this_cli() -> None:
    measured = host_listing()
    assert cli_version(bundled_cli()) == measured.cli_version, (
        "the bundled Claude Code CLI changed: measure its own listing entries again (runner/data/host_listing.json, "
        "see its `method`) and run this file")
    assert sum(e.always_full for e in measured.entries) == 11 and len(measured.entries) == 13


def test_plugin_namespaced_skills_are_estimated_as_listed(tmp_path: Path) -> None:
    """Two plugins' `seo` reach a session as `.claude/skills/<plugin>:seo/`: the CLI lists them under those names
    and the estimate says the same (issue 29, item 8)."""
    from tests.round2_truth import plugin_namespaces

    root = plugin_namespaces(tmp_path / "repo")
    done = run_cli("surface", "--library", str(root), "--format", "json")
    assert done.returncode == 0, done.stdout + done.stderr
    measured = json.loads(done.stdout)
    estimated = json.loads(cli("census", "--library", str(root), "--format", "json").output)["listing"]
    assert sorted(measured["with_description"]) == ["shop-kit:seo", "sitemap-writer", "web-kit:seo"]
    assert estimated["with_description"] == measured["with_description"]
    assert estimated["estimated_listing_chars"] == measured["listing_chars"] and measured["missing"] == []
