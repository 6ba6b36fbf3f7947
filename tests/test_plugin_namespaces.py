"""Plugin namespaces (issue 29, item 8): two plugins each shipping `seo` are two skills, named as Claude Code names
them (`web-kit:seo`, `shop-kit:seo`); only a name the host would really see twice is a duplicate.

The session side is measured, not assumed: a folder `.claude/skills/shop-kit:seo/` is listed by the bundled CLI as
`shop-kit:seo` (the surface audit below) and a Skill call naming it loads it (the end-to-end run).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from runner.corpus.loader import load_library
from runner.corpus.settings import Settings
from runner.hosts.activation import recognise
from runner.testing.fake_anthropic import FakeAnthropic, skill, text
from tests.conftest import fake_env, run_cli
from tests.round2_truth import one_plugin_repeats_a_name, plugin_namespaces

KEY = "sk-ant-test-namespaces-2c9e"
NAMESPACED = ["shop-kit:seo", "web-kit:seo"]


def test_two_plugins_shipping_one_name_are_two_skills(tmp_path: Path) -> None:
    library, findings = load_library(plugin_namespaces(tmp_path / "repo"), Settings())
    assert sorted(library.skills) == ["shop-kit:seo", "sitemap-writer", "web-kit:seo"]
    assert {library.skills[n].plugin for n in NAMESPACED} == {"shop-kit", "web-kit"}
    paths = library.skill_paths()
    assert paths["web-kit:seo"] != paths["shop-kit:seo"] and all(p.name == "seo" for n, p in paths.items()
                                                                 if n in NAMESPACED)
    # Frontmatter `name: seo` and `skill_name: "seo"` are the bare name the author wrote: no mismatch.
    assert not [f for f in findings if f.level.value == "error"], findings
    assert {c.uid for c in library.cases} >= {"web-kit:seo/evals/1", "shop-kit:seo/evals/2"}
    assert next(c for c in library.cases if c.uid == "shop-kit:seo/trigger/listing-rank").target == "shop-kit:seo"
    # One plugin listing two folders named `notes`: the host would see `desk:notes` twice, a real duplicate.
    library, findings = load_library(one_plugin_repeats_a_name(tmp_path / "desk"), Settings())
    assert sorted(library.skills) == ["notes"]
    duplicate = [f for f in findings if f.rule == "duplicate-skill-name"]
    assert len(duplicate) == 1 and duplicate[0].skill == "notes"
    # The manifest's plugin name becomes part of a session's folder name: one that is no plain name (`../x`) does
    # not namespace, and the clash stays a duplicate.
    root = plugin_namespaces(tmp_path / "escape")
    manifest = root / ".claude-plugin" / "marketplace.json"
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["plugins"][1]["name"] = "../../escape"
    manifest.write_text(json.dumps(data), encoding="utf-8")
    library, findings = load_library(root, Settings())
    assert sorted(library.skills) == ["seo", "sitemap-writer"]
    assert not any("/" in name for name in library.skills)
    assert [f.rule for f in findings if f.level.value == "error"] == ["duplicate-skill-name"]


def test_a_skill_call_naming_the_plugin_picks_that_skill(tmp_path: Path) -> None:
    library, _ = load_library(plugin_namespaces(tmp_path / "repo"), Settings())
    aliases = library.aliases()

    def fired(tool: str, value: dict[str, str]) -> str | None:
        activation = recognise(tool, value, "t1", 1, aliases=aliases)
        return activation.name if activation else None
    assert fired("Skill", {"skill": "shop-kit:seo"}) == "shop-kit:seo"
    assert fired("Skill", {"skill": " /web-kit:seo "}) == "web-kit:seo"
    assert fired("Read", {"file_path": "/p/.claude/skills/web-kit:seo/SKILL.md"}) == "web-kit:seo"
    # A bare `seo` names neither (the host has no skill of that name), and a plugin prefix on a name one plugin
    # ships once is dropped as before.
    assert fired("Skill", {"skill": "seo"}) == "seo" and "seo" not in library.skills
    assert fired("Skill", {"skill": "web-kit:sitemap-writer"}) == "sitemap-writer"


@pytest.mark.parametrize("host", ["claude-code", "api"])
def test_each_namespaced_skill_fires_as_itself(tmp_path: Path, host: str) -> None:
    library = plugin_namespaces(tmp_path / "repo")
    out = tmp_path / "run"
    with FakeAnthropic() as fake:
        from runner.testing.fake_judge import JUDGE_MATCH, verdicts
        fake.script(JUDGE_MATCH, verdicts("PASS"))
        fake.script("ranking of our product listings, step 1", skill("shop-kit:seo"), text("Step 1 done."))
        # The web-kit case is answered by the other plugin's seo: a FAIL that names what fired instead.
        fake.script("ranking of our page titles, step 1", skill("shop-kit:seo"), text("Step 1 done."))
        done = run_cli("run", "--library", str(library), "--out", str(out), "--host", host, "--repeats", "1",
                       "--timeout", "30", "--case", "*/evals/1", env=fake_env(fake, KEY))
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((out / "results.json").read_text(encoding="utf-8"))
    cases = {c["uid"]: c for c in results["cases"]}
    assert cases["shop-kit:seo/evals/1"]["state"] == "PASS", cases["shop-kit:seo/evals/1"]
    web = cases["web-kit:seo/evals/1"]
    assert web["state"] == "FAIL" and "shop-kit:seo" in json.dumps(web), web
    if host == "claude-code":
        surface = json.loads((out / "surface.json").read_text(encoding="utf-8"))
        assert set(NAMESPACED) <= set(surface["with_description"] + surface["name_only"])
