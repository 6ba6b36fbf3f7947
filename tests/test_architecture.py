"""The package's shape, held by tests: the stages import in pipeline order only, and no import cycle.

Every import counts, at module level or inside a function, under TYPE_CHECKING or not: a lazy import is still a
dependency the next engineer must know about. docs/architecture.md draws the same order.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

import runner

PACKAGE = Path(runner.__file__).parent

# Pipeline order, bottom first. A package may import itself and any package before it, never one after it.
# `testing` (the fakes the tests and benchmarks start) sits on top: nothing in the product imports it.
ORDER = ["core", "corpus", "hosts", "judge", "floor", "plan", "probes", "execute", "cache", "results", "report",
         "pipeline", "improve", "publish", "container", "cli", "__main__", "testing"]


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path, module: str | None = None) -> list[tuple[str, list[str]]]:
    """Every import of `path` (the module `module`, by default its name in the package), resolved: (the module
    imported from, the names imported from it); `import a.b` is ("a.b", [])."""
    module = module or _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: up from the package, then down to node.module
                parts = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(parts + ([base] if base else []))
            found.append((base, [alias.name for alias in node.names]))
    return found


def _imported(path: Path, module: str | None = None) -> set[str]:
    """The runner names `path` imports: each module imported from, and `module.name` for each name imported (a
    `from runner.x import y` may import the module runner.x.y)."""
    found = {name for base, names in _imports(path, module) for name in (base, *(f"{base}.{n}" for n in names))}
    return {name for name in found if name == "runner" or name.startswith("runner.")}


def _stage(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def package_imports() -> dict[str, set[tuple[str, str]]]:
    """stage -> {(module, imported module)} for every import that leaves the stage."""
    edges: dict[str, set[tuple[str, str]]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        stage = _stage(module)
        for target in _imported(path):
            other = _stage(target)
            if other is not None and other != stage and other in ORDER and stage is not None:
                edges[stage].add((module, target))
    return edges


def test_every_package_has_a_place_in_the_order() -> None:
    stages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()} | {"__main__"}
    data_only = {"data", "schemas"}  # files shipped in the package, no code
    assert stages - data_only - set(ORDER) == set(), "add the new package to ORDER (and docs/architecture.md)"


def test_no_stage_imports_a_later_one() -> None:
    rank = {name: index for index, name in enumerate(ORDER)}
    backwards = sorted(f"{module} imports {target}" for stage, edges in package_imports().items()
                       for module, target in edges if rank[_stage(target) or ""] > rank[stage])
    assert backwards == []


def test_no_import_cycle_between_packages() -> None:
    graph = {stage: {_stage(target) for _, target in edges} for stage, edges in package_imports().items()}
    seen: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in seen:
            return None
        seen.add(node)
        path.append(node)
        for nxt in sorted(n for n in graph.get(node, ()) if n):
            cycle = visit(nxt)
            if cycle:
                return cycle
        path.pop()
        return None

    cycles = [cycle for stage in sorted(graph) if (cycle := visit(stage))]
    assert cycles == []


def test_the_rule_sees_lazy_and_relative_imports(tmp_path: Path) -> None:
    """The checker itself: an import inside a function and a relative import of a later stage are found."""
    source = tmp_path / "probe.py"
    source.write_text("def f():\n    from runner.report import rollup\n    import runner.cli.app\n"
                      "from ..plan import planner\n")
    found = _imported(source, "runner.corpus.probe")
    assert {"runner.report.rollup", "runner.cli.app", "runner.plan.planner"} <= found


def _is_module(name: str) -> bool:
    path = PACKAGE.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _modules_imported(path: Path) -> set[str]:
    """The runner modules `path` imports, each import resolved to the module it reads (a name imported from a
    module is that module; `from runner.x import y` is the module runner.x.y when y is one)."""
    imports = _imports(path)
    found = {base for base, names in imports if not names}
    found |= {f"{base}.{name}" if _is_module(f"{base}.{name}") else base for base, names in imports for name in names}
    return {name for name in found if name.startswith("runner.")}


def crossing_modules() -> dict[str, set[str]]:
    """stage -> its modules (relative names) that another stage imports."""
    crossing: dict[str, set[str]] = defaultdict(set)
    for path in sorted(PACKAGE.rglob("*.py")):
        stage = _stage(_module_name(path))
        for target in _modules_imported(path):
            other = _stage(target)
            if other is not None and other != stage and other in ORDER:
                crossing[other].add(target.split(".", 2)[2] if target.count(".") >= 2 else "")
    return crossing


def test_each_stage_says_what_crosses_its_boundary() -> None:
    """Each stage's `__init__.py` lists in `__all__` the modules other stages may import, and exactly those that
    they do: a new crossing is a decision written down there, and a module no one imports any more leaves it."""
    import importlib

    crossing = crossing_modules()
    stale, unlisted = [], []
    for stage in ORDER:
        if stage in ("__main__", "testing", "cli"):
            continue
        declared = set(getattr(importlib.import_module(f"runner.{stage}"), "__all__", []))
        used = crossing.get(stage, set()) - {""}
        unlisted += [f"runner.{stage}.{name}" for name in sorted(used - declared)]
        stale += [f"runner.{stage}.{name}" for name in sorted(declared - used)]
    assert unlisted == [], "imported from another stage but not in its package's __all__"
    assert stale == [], "in __all__ but no other stage imports it"
    assert crossing.get("cli", set()) <= {""}, "only the package itself (its `main`) crosses from runner.cli"


def test_every_kind_has_its_traits_and_no_rule_lists_kinds_of_its_own() -> None:
    """A kind's meaning to the rules is its row of KIND_TRAITS (runner.core.kinds): every runnable kind has one,
    and the rules that once listed kinds (grading, early decision, improve's split) read the row instead."""
    from typing import get_args

    from runner.core.kinds import KIND_TRAITS, CaseKind, traits_of

    assert set(KIND_TRAITS) == set(get_args(CaseKind))
    assert traits_of("unknown") is None and traits_of("invalid") is None
    for module in ("execute/grading.py", "corpus/decide.py", "improve/split.py"):
        source = (PACKAGE / module).read_text(encoding="utf-8")
        spelled = [kind for kind in get_args(CaseKind) if f'"{kind}"' in source]
        assert spelled == [], f"{module} spells kinds {spelled}: read KIND_TRAITS instead"


def test_docs_architecture_names_every_module() -> None:
    """docs/architecture.md gives every module its room: its path, or its file name on a line that names its folder
    (`runner/execute/batch/` (`broker.py`, ...)). A package's `__init__.py` is named by its folder. A host, a forge
    or a report format added later may be named instead in the doc its change list touches (docs/hosts.md,
    docs/cli.md), so that adding one costs what docs/architecture.md says."""
    docs = PACKAGE.parent / "docs"
    doc = "\n".join((docs / name).read_text(encoding="utf-8") for name in ("architecture.md", "hosts.md", "cli.md"))
    lines = doc.splitlines()

    def named(path: Path) -> bool:
        relative = path.relative_to(PACKAGE.parent).as_posix()
        folder = relative.rpartition("/")[0] + "/"
        if relative in doc or (path.name == "__init__.py" and folder in doc):
            return True
        return any(folder in line and f"`{path.name}`" in line for line in lines)

    missing = sorted(str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py") if not named(p))
    assert missing == []


def test_no_two_modules_share_a_name() -> None:
    """A module's name says which it is: two `build.py` in two stages made every importer alias one of them."""
    names: dict[str, list[str]] = defaultdict(list)
    for path in PACKAGE.rglob("*.py"):
        if path.name != "__init__.py":
            names[path.stem].append(str(path.relative_to(PACKAGE.parent)))
    assert {name: paths for name, paths in names.items() if len(paths) > 1} == {}
