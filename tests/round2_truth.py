"""Synthetic libraries for issue 29, items 8 (plugin namespaces) and 9 (what the author reads must be true).

Every text here is written for these tests; the layouts follow public libraries, the words do not. Each builder
writes a library into the empty folder it is given and returns the path to pass as `--library`
(tests/test_truthful_outputs.py walks every builder of every `tests/round2_*.py` module).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.compat_libraries import creator_evals, git_init, skill, write_json


def _trigger_list(folder: Path, name: str, count: int) -> Path:
    """A skill-creator trigger query set under the Aegis file name (`evals/trigger-evals.json` holding a list)."""
    return write_json(folder / "evals" / "trigger-evals.json", [
        {"query": f"please run {name} on item {i}", "should_trigger": i % 2 == 0} for i in range(count)])


def plugin_namespaces(root: Path) -> Path:
    """Two plugins of one marketplace each ship a skill named `seo` (the host lists them as `web-kit:seo` and
    `shop-kit:seo`), each with its own cases; a third skill name is shipped once."""
    git_init(root)
    for plugin, topic in (("web-kit", "page titles"), ("shop-kit", "product listings")):
        folder = skill(root / "plugins" / plugin / "skills" / "seo",
                       description=f"Use when improving search ranking of {topic}.")
        write_json(folder / "evals" / "evals.json", {"skill_name": "seo", "evals": [
            {"id": i, "prompt": f"Improve the search ranking of our {topic}, step {i}.",
             "expectations": [f"Names step {i}."]} for i in (1, 2)]})
        write_json(root / "plugins" / plugin / ".claude-plugin" / "plugin.json", {"name": plugin})
    # Aegis's discrimination set names its own skill by the bare name its author knows.
    write_json(root / "plugins" / "shop-kit" / "skills" / "seo" / "evals" / "trigger-evals.json", {
        "skill": "seo", "overlaps_with": [], "cases": [
            {"id": "listing-rank", "prompt": "Rank our product listings higher in search.", "expected_skill": "seo",
             "should_not_trigger": ["sitemap-writer"]}]})
    creator_evals(skill(root / "plugins" / "web-kit" / "skills" / "sitemap-writer"), "sitemap-writer", count=1)
    write_json(root / ".claude-plugin" / "marketplace.json", {
        "name": "namespace-market", "owner": {"name": "tests"},
        "plugins": [{"name": "web-kit", "source": "./plugins/web-kit"},
                    {"name": "shop-kit", "source": "./plugins/shop-kit"}]})
    return root


def one_plugin_repeats_a_name(root: Path) -> Path:
    """One plugin whose manifest lists two folders that both end in `notes`: the host would see two skills of one
    name in one plugin, so this one is a real duplicate."""
    git_init(root)
    plugin = root / "plugins" / "desk"
    skill(plugin / "skills" / "notes")
    skill(plugin / "extra" / "notes")
    write_json(plugin / ".claude-plugin" / "plugin.json", {"name": "desk", "skills": ["./extra/notes"]})
    write_json(root / ".claude-plugin" / "marketplace.json", {
        "name": "desk-market", "owner": {"name": "tests"}, "plugins": [{"name": "desk", "source": "./plugins/desk"}]})
    return root


def several_roots(root: Path) -> Path:
    """`[library] roots` names two folders; skills there use skill-creator files under the Aegis names (the
    census counts them by what was read, not by file name)."""
    git_init(root)
    (root / ".skill-evals.toml").write_text('[library]\nroots = [".claude/skills", "skills"]\n', encoding="utf-8")
    helper = skill(root / ".claude" / "skills" / "repo-helper")
    _trigger_list(helper, "repo-helper", 4)
    for name in ("alpha-writer", "beta-reader"):
        folder = skill(root / "skills" / name)
        creator_evals(folder, name, count=2)
        _trigger_list(folder, name, 3)
    skill(root / "skills" / "gamma-idle")  # no eval file: an evals-missing warning that names a file that exists
    return root


def no_settings_file(root: Path) -> Path:
    """No .skill-evals.toml, a skill without evals, a folder meant as a skill without SKILL.md, a probe folder
    missing its question.md, a template and a manual-only skill: every finding must name a file or folder that
    exists."""
    git_init(root)
    base = root / ".claude" / "skills"
    creator_evals(skill(base / "ledger-check"), "ledger-check", count=3)
    probe = base / "ledger-check" / "evals" / "probes" / "half-probe"
    write_json(probe / "probe.json", {"id": "half-probe"})
    skill(base / "no-evals-yet")
    meant = base / "meant-skill"
    write_json(meant / "evals" / "evals.json", {"skill_name": "meant-skill", "evals": []})
    creator_evals(skill(base / "_template"), "_template", count=1)
    manual = skill(base / "deploy-now")
    text = (manual / "SKILL.md").read_text(encoding="utf-8")
    (manual / "SKILL.md").write_text(text.replace("---\n#", "disable-model-invocation: true\n---\n#", 1),
                                     encoding="utf-8")
    creator_evals(manual, "deploy-now", count=1)
    (root / ".claude" / "agents").mkdir(parents=True)
    (root / ".claude" / "agents" / "auditor.md").write_text("---\nname: auditor\ndescription: Audits.\n---\nAudit.\n",
                                                            encoding="utf-8")
    return root


def unparsed_frontmatter(root: Path) -> Path:
    """Skills whose frontmatter the strict parser rejects (no frontmatter; YAML broken by colons): the census's
    listing estimate must name them as the skills it is uncertain about."""
    git_init(root)
    base = root / ".claude" / "skills"
    for name, text in (("bare-notes", "No frontmatter here.\n# Bare notes\n"),
                       ("colon-heavy", "---\nname: colon-heavy\ndescription: Use for: colons: in text\n---\n# C\n")):
        (base / name).mkdir(parents=True)
        (base / name / "SKILL.md").write_text(text, encoding="utf-8")
        creator_evals(base / name, name, count=1)
    creator_evals(skill(base / "well-formed"), "well-formed", count=1)
    return root


LIBRARIES: dict[str, Callable[[Path], Path]] = {
    "plugin-namespaces": plugin_namespaces,
    "one-plugin-repeats-a-name": one_plugin_repeats_a_name,
    "several-roots": several_roots,
    "no-settings-file": no_settings_file,
    "unparsed-frontmatter": unparsed_frontmatter,
}
