"""Where a library's skills are: the layouts real repositories use, read as the host would load them.

`discover` finds the skill folders; each reaches a session flat, as `.claude/skills/<name>/`, the one layout Claude
Code reads. The first layout rule that applies decides, in the host's own order; a skill's name is its folder's.

Design notes: docs/design/library-layouts.md.
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, Field

from runner.core.errors import UsageError
from runner.corpus import bounded, jsonfile
from runner.corpus.files import ReadPolicy, make_policy, path_problem
from runner.corpus.findings import Finding, Level, display_path, error, info, is_unicode, printable, warning
from runner.corpus.settings import SETTINGS_FILE, Settings

NAME_NOT_UTF8 = "name-not-utf8"

SKILL_MD = "SKILL.md"
MARKETPLACE = PurePosixPath(".claude-plugin") / "marketplace.json"
PLUGIN_MANIFEST = PurePosixPath(".claude-plugin") / "plugin.json"
CLAUDE_SKILLS = PurePosixPath(".claude") / "skills"
# A folder holding a skill is never this deep below the folder searched (categories of categories at most).
MAX_DEPTH = 5
# Folders that hold copies, tests or tools, never the library itself.
SKIPPED = frozenset({"node_modules", "__pycache__", "venv", "dist", "build", "vendor", "site-packages", "tests",
                     "test", "__tests__", "fixtures", "testdata"})


class LibraryError(UsageError):
    """The path does not hold a library at all (a usage error, exit 2)."""


class SkillFolder(BaseModel):
    name: str = Field(description="The name the host lists the skill under: the folder's name, or "
                                  "`<plugin>:<folder>` where two plugins ship one name.")
    path: str = Field(description="The folder, absolute, as found (a symlink inside the repository stays one).")
    root: str = Field(description="The root it was found under, as shown (relative to the repository).")
    plugin: str | None = Field(default=None, description="The plugin that ships it (marketplace and plugin layouts).")


# Layouts read from a folder inside a repository (--library named it): only that folder is the library, not the
# repository's other eval files; a resume reads that folder again (runner.plan.plan.PlanLibrary.read_from).
FOLDER_LAYOUTS = ("single-skill", "named-folder")


class Layout(BaseModel):
    """Which layout was seen, which folders were read, and why."""

    root: str = Field(description="The repository root, absolute.")
    kind: str = Field(description="configured | single-skill | named-folder | marketplace | plugin | claude-skills | "
                                  "skills-folder | other-folder | root-skills | root-categories")
    description: str
    roots: list[str] = Field(description="The folders read, relative to the repository root.")
    note: str = Field(description="Why these folders: the rule that decided, and what else was seen.")
    skills: list[SkillFolder] = []
    agents: dict[str, str] = Field(default={}, description="Subagent name -> its .md file, absolute.")
    agents_dirs: list[str] = []
    evals_dirs: list[str] = Field(default=[], description="single-skill: folders of eval files at the repository "
                                                          "level, read as the one skill's.")
    nested: bool = Field(default=False, description="Some skills sit below category folders.")
    candidates: list[str] = Field(default=[], description="Folders holding skills that were not read, with counts.")


# ---- the repository root and what --library named ----------------------------------------------

def _is_skill(folder: Path) -> bool:
    return (folder / SKILL_MD).exists() or (folder / SKILL_MD).is_symlink()


def _marks_root(folder: Path) -> bool:
    return any((folder / marker).exists() for marker in
               (SETTINGS_FILE, ".git", str(MARKETPLACE), str(PLUGIN_MANIFEST), str(CLAUDE_SKILLS)))


def _is_claude_skills(folder: Path) -> bool:
    """`.claude/skills` (stored as `dot-claude/skills` where dot-folders cannot be kept): the host reads it one
    level deep."""
    return folder.name == "skills" and folder.parent.name in (".claude", "dot-claude")


def _enclosing_root(path: Path) -> Path | None:
    for candidate in path.parents:
        if (candidate / ".git").exists() or (candidate / SETTINGS_FILE).exists():
            return candidate
    return None


@dataclass(frozen=True)
class Located:
    root: Path
    named: Path | None = None  # a folder of skills that --library named
    single: Path | None = None  # the one skill folder that --library named


def locate(path: Path) -> Located:
    """The repository root for `--library PATH`, and what the path names inside it. Raises LibraryError."""
    path = Path(os.path.abspath(path))
    if not is_unicode(str(path)):
        # Every path the runner shows and writes (plan.json, results.json, reports) is relative to this root and
        # joined to it in sessions: a root that is not UTF-8 could be written nowhere.
        raise LibraryError(f"{printable(str(path))}: the path is not valid UTF-8 (shown escaped); rename the folder "
                           "or point --library at it through a path that is")
    try:
        exists = path.exists()
    except (OSError, ValueError) as exc:  # a NUL in the path, a name too long for the file system
        raise LibraryError(f"{printable(str(path))}: not a usable path ({exc})") from None
    if not exists:
        raise LibraryError(f"{path}: no such file or folder")
    if path.is_file() and path.name == SKILL_MD:
        path = path.parent
    if not path.is_dir():
        raise LibraryError(f"{path}: --library needs a folder (a repository root, a skills folder or one skill's "
                           "folder)")
    path = path.resolve()
    if not is_unicode(str(path)):
        raise LibraryError(f"{printable(str(path))}: the path (its links resolved) is not valid UTF-8 (shown "
                           "escaped); rename the folder")
    if _is_skill(path):
        return Located(root=_enclosing_root(path) or path, single=path)
    if _marks_root(path) or (path / "skills").is_dir():
        return Located(root=path)
    if _walk(path, _Walk(path, top_only_hidden=True, hidden_ok=frozenset({".claude", ".agents"}))):
        if _is_claude_skills(path):
            return Located(root=path.parent.parent, named=path)
        enclosing = _enclosing_root(path)
        # Inside a repository it is a folder of that repository's skills; on its own, a repository itself.
        return Located(root=enclosing, named=path) if enclosing else Located(root=path)
    raise LibraryError(f"{path}: no skills found (looked for folders holding SKILL.md, "
                       f".claude-plugin/marketplace.json and .claude-plugin/plugin.json)")


# ---- walking for skill folders ------------------------------------------------------------------

@dataclass
class _Walk:
    repository: Path
    findings: list[Finding] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    submodules: frozenset[str] = frozenset()
    # Walking a whole repository: hidden folders at its top are tools' (.github, .vscode), except these.
    top_only_hidden: bool = False
    hidden_ok: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # The read policy of the whole repository but its .git (runner.corpus.files); sizes do not matter here.
        self.policy = make_policy([self.repository], self.repository, 0)

    def inside(self, path: Path) -> bool:
        return self.policy.inside(path)

    def show(self, path: Path) -> str:
        return self.policy.show(path)


SCRIPT_SUFFIXES = frozenset({".py", ".sh", ".bash", ".js", ".mjs", ".cjs", ".ts", ".rb", ".pl", ".ps1"})


def _meant_as_skill(folder: Path) -> bool:
    """A skill.md in the wrong case, or eval files of its own (`evals/*.json`) in a folder that is not one of scripts.
    A folder of tools next to the skills (`scripts/` holding *.py and an evals/ of harness code) or a utility folder
    whose evals/ holds one folder per skill (`misc/evals/<skill>/`) is no skill missing its SKILL.md."""
    children = _children(folder)
    if any(child.name.lower() == "skill.md" for child in children):
        return True
    files = [child for child in children if child.is_file()]
    scripts = bool(files) and all(child.suffix.lower() in SCRIPT_SUFFIXES for child in files)
    return not scripts and any(child.suffix == ".json" and child.is_file() for child in _children(folder / "evals"))


def _children(folder: Path) -> list[Path]:
    try:
        return sorted(folder.iterdir(), key=lambda p: p.name)
    except OSError:
        return []


def _walk(folder: Path, walk: _Walk, depth: int = 0, limit: int = MAX_DEPTH) -> list[Path]:
    """Skill folders at or below `folder`'s children, in path order; a skill folder is not walked into.
    `limit` 0 = the children only (how the host scans a plugin's skills/ folder)."""
    found: list[Path] = []
    for child in _children(folder):
        hidden = child.name.startswith(".") and (child.name == ".git" or (walk.top_only_hidden and depth == 0
                                                                         and child.name not in walk.hidden_ok))
        if child.name in SKIPPED or hidden:
            continue
        if not is_unicode(child.name):
            _not_utf8(child, walk, depth, limit)
            continue
        if child.is_symlink() and not walk.inside(child):
            # Never followed. Reported when a skill stands behind it (one stat outside, no read); a link of a
            # skill's own folder is reported by the file scan, any other link is none of the library's.
            if _is_skill(child):
                walk.findings.append(error(
                    "symlink-escape", walk.show(child), 1,
                    f"symlink points outside the repository (to {os.readlink(child)}); it is not followed, so the "
                    "skill behind it is not read. Copy the folder into the repository instead.", skill=child.name))
            continue
        if not child.is_dir():
            continue
        real = os.path.realpath(child)
        if real in walk.seen:
            continue  # a second link to a folder already read, or a cycle
        walk.seen.add(real)
        if _is_skill(child):
            found.append(child)
            continue
        if walk.show(child) in walk.submodules and not _children(child):
            walk.findings.append(warning(
                "submodule-empty", walk.show(child), 1,
                f"{walk.show(child)}/ is a git submodule that is not checked out, so its skills (if any) are not "
                "read; run `git submodule update --init` (in CI: actions/checkout with submodules: true)"))
            continue
        below = _walk(child, walk, depth + 1, limit) if depth < limit else []
        if below:
            found.extend(below)
        elif _meant_as_skill(child):
            # Named at the folder (or its wrongly cased skill.md): the SKILL.md it lacks does not exist.
            wrong_case = next((c for c in _children(child) if c.name.lower() == "skill.md"), child)
            walk.findings.append(error(
                "skill-md-missing", walk.show(wrong_case), 1,
                f"{child.name}/ holds eval files or a skill.md but no SKILL.md (the name is case-sensitive); the "
                "host will not list it and its cases are not read", skill=child.name))
    return found


def _not_utf8(child: Path, walk: _Walk, depth: int, limit: int) -> None:
    """A folder whose name is not UTF-8 (Linux allows any byte but / and NUL) is never read: a skill's name is its
    folder's, and uids, plan.json, results.json and every report are UTF-8. When a skill is there (or below it,
    in a category folder), that is an error about it — shown escaped, `\\xff` for byte 0xff — which the floor
    reports as a skill it could not read; every other skill runs. Any other folder is none of the library's."""
    if not child.is_dir() or (child.is_symlink() and not walk.inside(child)):
        return
    skills = [child] if _is_skill(child) else (_walk(child, _Walk(walk.repository), depth + 1, limit)
                                               if depth < limit else [])
    if not skills:
        return
    what = "a skill folder" if skills == [child] else f"a folder holding {len(skills)} skill folder(s)"
    walk.findings.append(error(
        NAME_NOT_UTF8, walk.show(child), 1,
        f"{what} whose name is not valid UTF-8 (shown escaped): a skill is named by its folder, and no uid, "
        "results file or report can hold that name, so it is not read and no session gets it. Rename the folder "
        "in UTF-8", skill=printable(child.name)))


def _claude_skills(folder: Path, walk: _Walk) -> list[Path]:
    """The skill folders of a `.claude/skills` folder: its children only, as the host reads it. A skill below a
    category folder there is reported, never read: the host would not list it."""
    found = _walk(folder, walk, limit=0)
    deeper = _walk(folder, _Walk(walk.repository), limit=MAX_DEPTH)
    for skill in deeper:
        if skill.parent != folder and os.path.realpath(skill) not in {os.path.realpath(f) for f in found}:
            walk.findings.append(warning(
                "skill-not-loaded", walk.show(skill / SKILL_MD), 1,
                f"{walk.show(skill)}/ sits below a category folder of {walk.show(folder)}/; Claude Code reads "
                f"that folder one level deep and does not list it. Move it up to {walk.show(folder)}/{skill.name}/"))
    return found


def _submodules(root: Path) -> frozenset[str]:
    """Paths of the submodules .gitmodules declares (relative to the root)."""
    config = configparser.ConfigParser(interpolation=None)  # a `%` in a value is text, never a reference
    try:
        config.read_string(bounded.read_text(root / ".gitmodules", bounded.OPTION_FILE_MAX_BYTES))
    except (OSError, UnicodeDecodeError, configparser.Error):  # absent, not a regular file, not git's format
        return frozenset()
    return frozenset(config[section]["path"].strip().strip("/") for section in config.sections()
                     if "path" in config[section])


# ---- plugins and marketplaces -------------------------------------------------------------------

@dataclass
class _Plugins:
    root: Path
    policy: ReadPolicy
    walk: _Walk
    findings: list[Finding] = field(default_factory=list)
    skills: list[SkillFolder] = field(default_factory=list)
    roots: list[str] = field(default_factory=list)
    agents_dirs: list[Path] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    def read(self, path: Path) -> jsonfile.JsonDocument | None:
        doc, problems = jsonfile.read(path, self.policy)
        if doc is not None and doc.escaped:
            # Half a surrogate pair in a manifest (a description, a name) is carried escaped and reported, not a
            # reason to read no plugin: an escaped path names no folder, and that is its plugin's own error.
            for _, finding in doc.escaped:
                finding.level = Level.WARNING
            self.findings.extend(finding for _, finding in doc.escaped)
            problems = [p for p in problems if p.rule != jsonfile.LONE_SURROGATE]
        if doc is not None and not isinstance(doc.data, dict):
            problems = [error("plugin-manifest", self.policy.show(path), 1, "expected a JSON object")]
        self.findings.extend(problems)
        return None if problems else doc

    def add_path(self, plugin: str, plugin_dir: Path, entry: Any, shown: str, line: int) -> None:
        """One `skills` entry of a manifest: a skill folder, or a folder of skills."""
        if not isinstance(entry, str) or not entry.strip():
            self.findings.append(error("plugin-manifest", shown, line, f"plugin {plugin}: a `skills` entry must be a "
                                                                      f"path, got {entry!r}"))
            return
        if problem := path_problem(entry):
            self.findings.append(error("plugin-manifest", shown, line, f"plugin {plugin}: skills path {_cut(entry)!r} "
                                                                      f"is not a usable path ({problem})"))
            return
        target = plugin_dir / entry
        if not self.walk.inside(target):
            self.findings.append(error("plugin-path-escape", shown, line,
                                       f"plugin {plugin}: skills path {entry!r} leaves the repository; not read",
                                       skill=PurePosixPath(entry).name or None))
            return
        if _is_skill(target):
            self.add(plugin, target)
        elif target.is_dir():
            for folder in _walk(target, self.walk, limit=0):
                self.add(plugin, folder)
        else:
            self.findings.append(error("plugin-path-missing", shown, line,
                                       f"plugin {plugin}: skills path {entry!r} is not a folder of this repository",
                                       skill=PurePosixPath(entry).name or None))

    def add(self, plugin: str, folder: Path) -> None:
        real = os.path.realpath(folder)
        if any(os.path.realpath(s.path) == real for s in self.skills):
            return  # listed by two plugins, or by a manifest and the default folder: one skill
        root = display_path(folder.parent, self.root)
        if root not in self.roots:
            self.roots.append(root)
        self.skills.append(SkillFolder(name=folder.name, path=str(folder), root=root, plugin=plugin))

    def plugin(self, name: str, plugin_dir: Path, listed: Any, shown: str, lines: list[int],
               replaces: bool = False) -> None:
        """A plugin's skills (the design notes, rule 4). `listed`: the marketplace entry's `skills`; `replaces`:
        the entry's source is the marketplace root, so its list names the plugin's skills. `lines`: the line of
        `skills` and of each listed path, for findings."""
        self.names.append(name)
        if (plugin_dir / "agents").is_dir():
            self.agents_dirs.append(plugin_dir / "agents")
        before = len(self.skills)
        if listed is not None:
            self.add_listed(name, plugin_dir, listed, shown, lines)
        manifest_path = plugin_dir / str(PLUGIN_MANIFEST)
        if manifest_path.is_file() and not (listed is not None and replaces):
            manifest = self.read(manifest_path)
            if manifest is not None and manifest.data.get("skills") is not None:
                entries = manifest.data["skills"]
                count = len(entries) if isinstance(entries, list) else 1
                self.add_listed(name, plugin_dir, entries, self.policy.show(manifest_path),
                                [manifest.line("skills")] + [manifest.line("skills", i) for i in range(count)])
        if listed is not None and replaces and len(self.skills) > before:
            return
        default = plugin_dir / "skills"
        if default.is_dir():
            for folder in _walk(default, self.walk, limit=0):
                self.add(name, folder)
        elif len(self.skills) == before and _is_skill(plugin_dir):
            self.add(name, plugin_dir)

    def add_listed(self, name: str, plugin_dir: Path, listed: Any, shown: str, lines: list[int]) -> None:
        entries = [listed] if isinstance(listed, str) else listed
        if not isinstance(entries, list):
            self.findings.append(error("plugin-manifest", shown, lines[0],
                                       f"plugin {name}: `skills` must be a path or a list of paths"))
            return
        for position, entry in enumerate(entries):
            line = lines[position + 1] if isinstance(listed, list) and position + 1 < len(lines) else lines[0]
            self.add_path(name, plugin_dir, entry, shown, line)


def _marketplace(root: Path, policy: ReadPolicy, walk: _Walk) -> _Plugins:
    plugins = _Plugins(root, policy, walk)
    path = root / str(MARKETPLACE)
    doc = plugins.read(path)
    if doc is None:
        return plugins
    shown = policy.show(path)
    entries = doc.data.get("plugins")
    if not isinstance(entries, list):
        plugins.findings.append(error("plugin-manifest", shown, doc.line("plugins"),
                                      "marketplace.json needs a `plugins` list"))
        return plugins
    metadata = doc.data.get("metadata") if isinstance(doc.data.get("metadata"), dict) else {}
    plugin_root = metadata.get("pluginRoot") if isinstance(metadata.get("pluginRoot"), str) else ""
    for index, entry in enumerate(entries):
        line = doc.line("plugins", index)
        if not isinstance(entry, dict):
            plugins.findings.append(error("plugin-manifest", shown, line, f"plugins[{index}] is not an object"))
            continue
        named = entry.get("name")
        name = named if isinstance(named, str) else f"plugins[{index}]"
        source = entry.get("source")
        if not isinstance(source, str):
            kind = source.get("source", "remote") if isinstance(source, dict) else type(source).__name__
            plugins.findings.append(info(
                "plugin-remote-source", shown, doc.line("plugins", index, "source"),
                f"plugin {name} comes from outside this repository ({kind}); its skills are not read"))
            continue
        relative = source if source.startswith(("./", "../", "/")) or not plugin_root else f"{plugin_root}/{source}"
        if problem := path_problem(relative):
            plugins.findings.append(error(
                "plugin-path-missing", shown, doc.line("plugins", index, "source"),
                f"plugin {name}: source {_cut(relative)!r} is not a usable path ({problem}); its skills are not read"))
            continue
        plugin_dir = root / relative
        if not walk.inside(plugin_dir) or not plugin_dir.is_dir():
            plugins.findings.append(error(
                "plugin-path-missing", shown, doc.line("plugins", index, "source"),
                f"plugin {name}: source {source!r} is not a folder of this repository; its skills are not read"))
            continue
        listed = entry.get("skills")
        count = len(listed) if isinstance(listed, list) else 1
        plugins.plugin(name, plugin_dir, listed, shown, [doc.line("plugins", index, "skills")] +
                       [doc.line("plugins", index, "skills", i) for i in range(count)],
                       replaces=plugin_dir.resolve() == root.resolve())
    return plugins


# ---- the decision -------------------------------------------------------------------------------

def _group(folder: Path, root: Path) -> str:
    parts = folder.relative_to(root).parts
    if parts[:2] == CLAUDE_SKILLS.parts:
        return CLAUDE_SKILLS.as_posix()
    return parts[0] if len(parts) > 1 else "."


def _folder_of(skills: list[Path], root: Path, group: str) -> str:
    """How to show a group: the one folder its skills share (`dot-claude/skills`), else the group's folder."""
    parents = {skill.parent for skill in skills}
    return display_path(parents.pop(), root) if len(parents) == 1 else group


def _is_nested(folder: Path, root: Path) -> bool:
    """Below a category folder of its group (`skills/<category>/<skill>`; `<x>/skills/<skill>` is not)."""
    parts = folder.relative_to(root).parts
    inner = parts[2:-1] if _group(folder, root) == CLAUDE_SKILLS.as_posix() else parts[1:-1]
    return any(part != "skills" for part in inner)


def _count(n: int) -> str:
    return f"{n} skill{'s' if n != 1 else ''}"


def _scan(root: Path, walk: _Walk) -> tuple[str, str, list[str], str, list[SkillFolder], list[str]]:
    """Rule 6: (kind, description, roots, note, skills, candidates) from walking the repository."""
    # .claude/skills is walked last, so that where it links to another folder (a mirror of .agents/skills) the
    # skills count once, in the folder they live in.
    walk.top_only_hidden, walk.hidden_ok = True, frozenset({".agents"})
    repository_found = _walk(root, walk)
    walk.top_only_hidden = False
    claude_dir = root / str(CLAUDE_SKILLS)
    claude_found = _claude_skills(claude_dir, walk) if claude_dir.is_dir() else []
    groups: dict[str, list[Path]] = {}
    for folder in repository_found + claude_found:
        groups.setdefault(_group(folder, root), []).append(folder)
    claude = groups.pop(CLAUDE_SKILLS.as_posix(), [])
    repository = [f for folders in groups.values() for f in folders]
    candidates: list[str] = []
    if claude and (not repository or len(claude) >= len(repository)):
        chosen, roots = claude, [CLAUDE_SKILLS.as_posix()]
        if repository:
            candidates = [f"{g}/ ({_count(len(fs))})" for g, fs in sorted(groups.items())]
        note = "`.claude/skills` (what Claude Code loads in this repository)" + (
            f"; it holds at least as many skills as the other folders ({', '.join(candidates)}), which were not "
            "read: list them in [library] roots to add them" if candidates else "")
    else:
        chosen, roots = repository, sorted(_folder_of(folders, root, group) for group, folders in groups.items())
        if claude:
            candidates = [f"{CLAUDE_SKILLS.as_posix()}/ ({_count(len(claude))})"]
        note = f"the folders holding SKILL.md ({_count(len(repository))})" + (
            f"; `.claude/skills` holds fewer ({_count(len(claude))}) and was not read: list both in [library] roots "
            "to read both" if claude else "")
    nested = any(_is_nested(f, root) for f in chosen)
    if roots == [CLAUDE_SKILLS.as_posix()]:
        kind, description = "claude-skills", "project skills in .claude/skills/"
    elif roots == ["skills"] or (nested and sorted(groups) == ["skills"]):
        kind, description = "skills-folder", "a skills/ folder"
    elif len(roots) == 1 and roots[0] != ".":
        kind, description = "other-folder", f"a skills folder under another name: {roots[0]}/"
    elif roots == ["."]:
        kind, description = "root-skills", "skill folders at the repository root"
    else:
        kind, description = "root-categories", "category folders at the repository root: " + ", ".join(
            f"{r}/" for r in roots)
    if nested and kind != "root-categories":
        description += ", with skills inside category folders"
    skills = [SkillFolder(name=f.name, path=str(f), root=display_path(f.parent, root)) for f in chosen]
    return kind, description, roots, note, skills, candidates


def _cut(text: str, limit: int = 80) -> str:
    """A path from the data as a message shows it: a huge one is cut."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _configured(root: Path, entries: list[str], walk: _Walk) -> tuple[list[SkillFolder], list[Finding]]:
    skills: list[SkillFolder] = []
    problems: list[Finding] = []
    for entry in entries:
        if problem := path_problem(entry):
            problems.append(error("settings-invalid", SETTINGS_FILE, 1,
                                  f"[library] names {_cut(entry)!r}, which is not a usable path: {problem}"))
            continue
        folder = root / entry
        if not folder.is_dir() or not walk.inside(folder):
            problems.append(error("settings-invalid", SETTINGS_FILE, 1,
                                  f"[library] names {entry!r}, which is not a folder of the repository"))
            continue
        if _is_skill(folder):
            skills.append(SkillFolder(name=folder.name, path=str(folder), root=display_path(folder, root)))
            continue
        for found in _claude_skills(folder, walk) if _is_claude_skills(folder) else _walk(folder, walk):
            skills.append(SkillFolder(name=found.name, path=str(found), root=display_path(found.parent, root)))
    return skills, problems


def _agents(root: Path, settings: Settings, skills: list[SkillFolder], extra: list[Path], policy: ReadPolicy
            ) -> list[Path]:
    """Folders of subagents: the configured one; else `agents/` beside each folder of skills (`.claude/agents`
    beside `.claude/skills`), at the repository root, in `.claude/`, and each plugin's."""
    if settings.library.agents:  # discover reported an unusable one
        return [] if path_problem(settings.library.agents) else [(root / settings.library.agents).resolve()]
    parents = sorted({Path(skill.path).parent for skill in skills}, key=str)
    folders = [parent.parent / "agents" for parent in parents if parent != root]
    folders += [root / "agents", root / ".claude" / "agents", *extra]
    out: list[Path] = []
    for folder in folders:
        if folder.is_dir() and policy.inside(folder) and folder.resolve() not in [f.resolve() for f in out]:
            out.append(folder)
    return out


_PLUGIN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _namespaced(skills: list[SkillFolder]) -> list[SkillFolder]:
    """Claude Code names a plugin's skill `plugin:skill`, so two plugins that each ship `seo` do not clash: where
    two plugins ship one name, each of those skills takes the host's name (and a session gets it as the folder
    `.claude/skills/<plugin>:<skill>/`, which the CLI lists as `<plugin>:<skill>`, measured on 2.1.332). A name
    one plugin ships once keeps its bare name, the one a project skill has in a session."""
    plugins: dict[str, set[str]] = {}
    for skill in skills:
        plugins.setdefault(skill.name, set()).add(skill.plugin or "")
    # The plugin's name comes from a manifest the pull request may write, and becomes part of a folder name in
    # every session: only a plain name (no `/`, no `..`) namespaces; otherwise the clash stays a duplicate.
    clashing = {name for name, owners in plugins.items()
                if len(owners) > 1 and all(_PLUGIN_NAME.fullmatch(owner) for owner in owners)}
    return [skill.model_copy(update={"name": f"{skill.plugin}:{skill.name}"}) if skill.name in clashing else skill
            for skill in skills]


def _dedupe(skills: list[SkillFolder], root: Path) -> tuple[list[SkillFolder], list[Finding]]:
    kept: dict[str, SkillFolder] = {}
    problems: list[Finding] = []
    for skill in _namespaced(skills):
        if not (is_unicode(skill.name) and is_unicode(skill.path)):  # one a rule above did not meet (see _not_utf8)
            problems.append(error(NAME_NOT_UTF8, display_path(Path(skill.path), root), 1,
                                  "a skill folder whose path is not valid UTF-8 (shown escaped): it is not read",
                                  skill=printable(skill.name)))
            continue
        first = kept.get(skill.name)
        if first is None:
            kept[skill.name] = skill
            continue
        if os.path.realpath(first.path) == os.path.realpath(skill.path):
            continue  # the same folder reached twice (a link): one skill
        problems.append(error(
            "duplicate-skill-name", display_path(Path(skill.path) / SKILL_MD, root), 1,
            f"a second skill folder named {skill.name!r} (the first is {display_path(Path(first.path), root)}/); "
            "the host would list both under one name, so only the first is read. Rename one of them",
            skill=skill.name))
    return list(kept.values()), problems


def discover(path: Path, settings: Settings) -> tuple[Layout, list[Finding]]:
    """The library's layout for `--library PATH`. Raises LibraryError when the path holds no library."""
    located = locate(path)
    root = located.root
    walk = _Walk(root, submodules=_submodules(root))
    policy = make_policy([root], root, settings.limits.max_file_bytes)
    findings: list[Finding] = []
    evals_dirs: list[str] = []
    candidates: list[str] = []
    extra_agents: list[Path] = []
    configured = settings.library.roots or ([settings.library.skills] if settings.library.skills else [])
    nested = False
    if configured:
        skills, problems = _configured(root, configured, walk)
        findings += problems
        kind, description = "configured", "the folders [library] roots names"
        roots, note = list(configured), f"[library] in {SETTINGS_FILE}"
    elif located.single is not None:
        folder = located.single
        skills = [SkillFolder(name=folder.name, path=str(folder), root=display_path(folder.parent, root))]
        kind, description = "single-skill", f"one skill folder: {display_path(folder, root)}/"
        roots, note = [display_path(folder, root)], "--library names a folder holding SKILL.md"
        if folder != root and (root / "evals").is_dir() and not (folder / "evals").is_dir():
            evals_dirs.append("evals")
            note += "; it has no evals/ of its own, so the repository's evals/ folder is read as its"
    elif located.named is not None:
        folders = _claude_skills(located.named, walk) if _is_claude_skills(located.named) else _walk(located.named,
                                                                                                     walk)
        skills = [SkillFolder(name=f.name, path=str(f), root=display_path(f.parent, root)) for f in folders]
        shown = display_path(located.named, root)
        nested = any(f.parent != located.named for f in folders)
        kind, description = "named-folder", f"the skills folder --library names: {shown}/" + (
            ", with skills inside category folders" if nested else "")
        roots, note = [shown], "--library names a folder of skills"
    elif (root / str(MARKETPLACE)).is_file():
        plugins = _marketplace(root, policy, walk)
        findings += plugins.findings
        skills, roots, extra_agents = plugins.skills, plugins.roots, plugins.agents_dirs
        kind = "marketplace"
        description = f"a plugin marketplace ({len(plugins.names)} plugin(s) in this repository: " + \
            ", ".join(plugins.names) + ")"
        note = f"{MARKETPLACE} lists the plugins; a plugin's skills are its skills/ folder and the `skills` paths " \
               "of its entry and manifest (an entry sourced at the repository root lists them instead)"
    elif (root / str(PLUGIN_MANIFEST)).is_file():
        plugins = _Plugins(root, policy, walk)
        manifest = plugins.read(root / str(PLUGIN_MANIFEST))
        name = manifest.data.get("name") if manifest is not None and isinstance(manifest.data.get("name"), str) \
            else root.name
        plugins.plugin(name, root, None, str(PLUGIN_MANIFEST), [1])
        findings += plugins.findings
        skills, roots, extra_agents = plugins.skills, plugins.roots, plugins.agents_dirs
        kind, description = "plugin", f"one plugin ({name})"
        note = f"{PLUGIN_MANIFEST}: the plugin's skills/ folder and the `skills` paths its manifest lists"
    else:
        kind, description, roots, note, skills, candidates = _scan(root, walk)
    if kind in ("marketplace", "plugin", "configured"):
        nested = any(_is_nested(Path(s.path), root) for s in skills if Path(s.path).is_relative_to(root))
    if kind == "marketplace" and (root / str(CLAUDE_SKILLS)).is_dir():
        local = _walk(root / str(CLAUDE_SKILLS), _Walk(root))
        if local and not any(r.startswith(str(CLAUDE_SKILLS)) for r in roots):
            candidates.append(f"{CLAUDE_SKILLS}/ ({_count(len(local))})")
            note += f"; {CLAUDE_SKILLS}/ ({_count(len(local))}) was not read: list it in [library] roots to add it"
    skills, problems = _dedupe(skills, root)
    findings += walk.findings + problems
    if settings.library.agents and (problem := path_problem(settings.library.agents)):
        findings.append(error("settings-invalid", SETTINGS_FILE, 1, f"[library] agents names "
                              f"{_cut(settings.library.agents)!r}, which is not a usable path: {problem}"))
    agents_dirs = _agents(root, settings, skills, extra_agents, policy)
    agents: dict[str, str] = {}
    for folder in agents_dirs:
        for file in sorted(folder.glob("*.md")):
            if file.is_symlink() and not walk.inside(file):
                continue
            if not is_unicode(file.name):
                # A subagent is named by its file; a name no case or report can hold is not read (a warning: the
                # agents folder is no skill's, and an error there would hold back the whole library).
                findings.append(warning(NAME_NOT_UTF8, display_path(file, root), 1,
                                        "a subagent file whose name is not valid UTF-8 (shown escaped): it is not "
                                        "read, so no case can name it"))
                continue
            agents.setdefault(file.stem, str(file))
    layout = Layout(root=str(root), kind=kind, description=description, roots=roots, note=note, skills=skills,
                    agents=agents, agents_dirs=[display_path(f, root) for f in agents_dirs], evals_dirs=evals_dirs,
                    nested=nested, candidates=candidates)
    return layout, findings
