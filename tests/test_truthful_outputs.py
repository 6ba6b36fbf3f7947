"""What the author reads must be true (issue 29, item 9), on every synthetic library the suite has.

For each library of every `tests/round2_*.py` module (found by name: a new module needs no edit here), each
builder of tests/compat_libraries.py and the bundled example library, this runs census (text and json), validate
(text and json), plan (json) and `run` without a key, then checks that

- every path a finding, a case, a root or a candidate names exists (relative to the repository root, as shown);
- every count the census prints equals a count taken here from the files (the JSON documents, SKILL.md
  frontmatter, the agents folders), never from the runner's own readers;
- the text renderings print the numbers the JSON holds, and headers name every root that was read.

Cheap by design: the api host (no surface capture through the CLI), no key (every case UNRUN, no session).
"""

from __future__ import annotations

import importlib
import json
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import compat_libraries as compat
from tests.conftest import EXAMPLE, cli

TESTS = Path(__file__).resolve().parent
# Keys under which an eval file holds its list of cases, in the shapes libraries write (counted here on their own).
LIST_KEYS = ("cases", "evals", "queries", "scenarios", "tests", "items")
PROMPT_KEYS = ("prompt", "query", "input", "question")


def _compat_builders() -> dict[str, Callable[[Path], Path]]:
    def links(root: Path) -> Path:
        return compat.links_and_submodules(root, root.parent / "outside")
    return {"nested_categories": compat.nested_categories, "root_categories": compat.root_categories,
            "marketplace": compat.marketplace, "other_named_folder": compat.other_named_folder,
            "single_skill_repository": compat.single_skill_repository, "links_and_submodules": links,
            "rival_roots": compat.rival_roots, "formats_library": compat.formats_library}


def _example(root: Path) -> Path:
    shutil.copytree(EXAMPLE, root, symlinks=True, dirs_exist_ok=True)
    return root


def _libraries() -> Iterator[Any]:
    for module_file in sorted(TESTS.glob("round2_*.py")):
        module = importlib.import_module(f"tests.{module_file.stem}")
        for name, builder in module.LIBRARIES.items():
            yield pytest.param(builder, id=f"{module_file.stem}:{name}")
    for name, builder in _compat_builders().items():
        yield pytest.param(builder, id=f"compat:{name}")
    yield pytest.param(_example, id="example")


# ---- independent counts (from the files, not through runner.corpus) -------------------------------

def _entries(path: Path) -> int | None:
    """How many cases an eval file holds as written: the items of its list, or one for a single case (None: the
    file is not JSON, so there is nothing to count here)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if isinstance(data, list):
        return sum(1 for item in data if isinstance(item, dict))
    if isinstance(data, dict):
        for key in LIST_KEYS:
            if isinstance(data.get(key), list):
                return sum(1 for item in data[key] if isinstance(item, dict))
        if any(key in data for key in PROMPT_KEYS):
            return 1
    return 0


def _frontmatter(skill_md: Path) -> dict[str, str]:
    """Top-level `key: value` lines of a SKILL.md's frontmatter, values as written."""
    text = skill_md.read_text(encoding="utf-8")
    if not text.startswith("---\n"):
        return {}
    block = text[4:].split("\n---", 1)[0]
    return {m.group(1): m.group(2).strip() for m in re.finditer(r"^([A-Za-z][\w-]*):(.*)$", block, re.MULTILINE)}


def _exists(root: Path, shown: str) -> bool:
    path = Path(shown) if Path(shown).is_absolute() else root / shown
    return path.exists() or path.is_symlink()


def _run_json(*args: str) -> tuple[int, Any]:
    done = cli(*args)
    assert "Traceback" not in done.output, done.output
    return done.exit_code, json.loads(done.output)


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_BASE_URL", "CLAUDE_CODE_OAUTH_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CI", "true")


@pytest.mark.parametrize("builder", list(_libraries()))
def test_every_path_and_count_the_author_reads_is_true(tmp_path: Path, builder: Callable[[Path], Path]) -> None:
    target = tmp_path / "library"
    target.mkdir()
    library = str(builder(target))
    code, census = _run_json("census", "--library", library, "--format", "json")
    assert code == 0
    root = Path(census["library"]["root"])
    code, validated = _run_json("validate", "--library", library, "--format", "json")
    assert code in (0, 1)
    code, plan = _run_json("plan", "--library", library, "--host", "api", "--format", "json")
    assert code in (0, 1)
    run_dir = tmp_path / "run"
    ran = cli("run", "--library", library, "--host", "api", "--out", str(run_dir))
    assert "Traceback" not in ran.output, ran.output
    results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))

    # Every path named exists.
    named = [(f"finding {f['rule']}", f["file"]) for f in validated["findings"]]
    named += [(f"root of {census['library']['layout']}", r) for r in census["library"].get("roots", [])]
    named += [("candidate", c.rsplit(" (", 1)[0]) for c in census["library"].get("candidates", [])]
    named += [(f"case {c['uid']}", c["file"]) for c in plan["cases"] + results["cases"]]
    named += [(f"skill {name}", shown) for name, shown in census["skills"]["folders"].items()]
    named += [(f"eval file of {name}", f) for name, files in census["skills"]["eval_files"].items() for f in files]
    named += [("agents folder", d) for d in census["library"].get("agents_dirs", [])]
    missing = [(what, shown) for what, shown in named if not _exists(root, shown)]
    assert not missing, f"paths named that do not exist (relative to {root}): {missing}"

    # Every count equals one taken from the files.
    folders = {name: root / shown for name, shown in census["skills"]["folders"].items()}
    skills = census["skills"]
    assert all((folder / "SKILL.md").is_file() for folder in folders.values())
    assert skills["total"] == len(folders) == validated["skills"]
    assert sorted(skills["templates"]) == sorted(n for n in folders if n.startswith("_"))
    assert skills["real"] == len(folders) - len(skills["templates"])
    assert sorted(skills["manual_only"]) == sorted(
        n for n, f in folders.items() if _frontmatter(f / "SKILL.md").get("disable-model-invocation") == "true")
    eval_files = {n: fs for n, fs in skills["eval_files"].items() if fs}
    assert skills["with_evals"] == len(eval_files)
    assert skills["with_trigger_evals"] == sum(
        1 for fs in eval_files.values() if any(Path(f).name == "trigger-evals.json" for f in fs))
    # A probe counts when its folder holds both files and no error names anything in it.
    errors = [Path(f["file"]) for f in validated["findings"] if f["level"] == "error"]
    with_probes = {n for n, f in folders.items() for d in (f / "evals" / "probes").glob("*/")
                   if (d / "probe.json").is_file() and (d / "question.md").is_file()
                   and not any(e == d.relative_to(root) or d.relative_to(root) in e.parents for e in errors)}
    assert skills["with_probes"] == len(with_probes)
    # Never silence: every JSON file in a skill's evals/ or evaluations/ folder (its fixtures and probes aside) is
    # read as one of its eval files or named by a finding.
    named_files = {f["file"] for f in validated["findings"]}
    for name, folder in folders.items():
        for path in [*folder.glob("evals/*.json"), *folder.glob("evaluations/*.json")]:
            shown = path.relative_to(root).as_posix()
            assert shown in skills["eval_files"][name] or shown in named_files, f"{shown}: neither read nor reported"
    agents = set()
    for shown in census["library"].get("agents_dirs", []):
        agents |= {p.stem for p in (root / shown).glob("*.md")}
    assert sorted(census["subagents"]["defined"]) == sorted(agents)

    # Cases: each file read holds as many cases as the census says, less the ones a duplicate-id finding drops.
    by_file = census["cases"]["by_file"]
    dropped = {f["file"]: 0 for f in validated["findings"]}
    for finding in validated["findings"]:
        dropped[finding["file"]] += finding["rule"] == "duplicate-id"
    for shown, count in by_file.items():
        written = _entries(root / shown)
        if Path(shown).name == "probe.json" or written is None:
            continue
        assert count == written - dropped.get(shown, 0), f"{shown}: census says {count}, the file holds {written}"
    cases = census["cases"]
    assert sum(by_file.values()) == cases["total"] + cases["template_cases_not_run"]
    assert cases["total"] == sum(cases["by_kind"].values()) == sum(cases["by_source"].values())
    assert cases["total"] == validated["cases"]
    # The plan holds every case read, and one entry per eval file of which no case could be read (issue 29 item 10).
    unreadable = {ref["uid"] for ref in cases["unreadable_files"]}
    assert len(plan["cases"]) == cases["total"] + len(unreadable)
    assert {c["uid"] for c in plan["cases"] if c["uid"] in unreadable} == unreadable
    assert all((root / ref["detail"].rsplit(":", 1)[0]).exists() for ref in cases["unreadable_files"])
    # results.json holds every planned case (and may add a row for a file no case could be read from), all UNRUN.
    assert {c["uid"] for c in plan["cases"]} <= {c["uid"] for c in results["cases"]}
    assert {c["state"] for c in results["cases"]} <= {"UNRUN"}
    # The listing estimate names the skills it is uncertain about: those whose SKILL.md has no parsed frontmatter.
    broken = {n for n, f in folders.items() if not (f / "SKILL.md").read_text(encoding="utf-8").startswith("---\n")}
    assert broken <= set(census["listing"]["unparsed_frontmatter"]) | set(skills["manual_only"])
    assert census["findings"]["error"] == validated["counts"]["error"] - sum(
        f["rule"] == "library-validator" and f["level"] == "error" for f in validated["findings"])

    # The text renderings say the same, and name every root read.
    text = cli("census", "--library", library).output
    roots = census["library"].get("roots", [])
    header = text.splitlines()[0]
    assert all(r in header for r in roots), header
    line = re.search(r"Skills: (\d+) skill folders?: (\d+) skills?, (\d+) templates?.*?; (\d+) manual-only; "
                     r"(\d+) with eval files read; (\d+) with a trigger-evals\.json; (\d+) with probes; "
                     r"(\d+) subagents? defined", text)
    assert line, text
    assert [int(g) for g in line.groups()] == [
        skills["total"], skills["real"], len(skills["templates"]), len(skills["manual_only"]), skills["with_evals"],
        skills["with_trigger_evals"], skills["with_probes"], len(census["subagents"]["defined"])]
    assert f"Cases: {cases['total']:,} " in text
    f = census["findings"]
    assert f"Validation: {f['error']} error(s), {f['warning']} warning(s)" in text
    checked = cli("validate", "--library", library).output
    assert f"checked {skills['total']} skill(s), {cases['total']:,} case(s)" in checked
    c = validated["counts"]
    assert f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} note(s)" in checked
    assert all(r in checked.splitlines()[-2] for r in roots), checked


def test_a_settings_finding_names_the_settings_file_given(tmp_path: Path) -> None:
    """`--config` names the settings file: a finding about `[library] roots` points there, not at a
    .skill-evals.toml the library does not have."""
    library = compat.rival_roots(tmp_path / "repo")
    config = tmp_path / "elsewhere.toml"
    config.write_text('[library]\nroots = ["no-such-folder", "skills"]\n', encoding="utf-8")
    code, validated = _run_json("validate", "--library", str(library), "--config", str(config), "--format", "json")
    invalid = [f for f in validated["findings"] if f["rule"] == "settings-invalid"]
    assert code == 1 and len(invalid) == 1
    assert _exists(library, invalid[0]["file"]) and Path(invalid[0]["file"]).name == "elsewhere.toml"
