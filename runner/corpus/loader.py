"""Reading a library: `load_library` turns a repository folder into the corpus model (runner.corpus.library).

It never raises on bad content: whatever cannot be read becomes a finding with its file and line, and whatever can
be read becomes a typed model. Every eval format (runner.corpus.dialects) is read here into the one set of models.
"""

from __future__ import annotations

import dataclasses
import fnmatch
import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.corpus import bounded, classify, dialects, frontmatter, jsonfile, kind_words, outside, slash, tags
from runner.corpus import schema_check as schemas
from runner.corpus.files import ReadPolicy, make_policy, path_problem, read_text, relative_shown, scan_tree
from runner.corpus.findings import Finding, Level, display_path, error, info, is_unicode, printable, sort_key, warning
from runner.corpus.layout import (
    FOLDER_LAYOUTS,
    NAME_NOT_UTF8,
    Layout,
    SkillFolder,
    discover,
    locate,
)
from runner.corpus.library import (
    ANY_SKILL,
    FILE_UNREADABLE,
    LIBRARY_OWNER,
    PROBE_UNREADABLE,
    Agent,
    Assertion,
    Case,
    CaseFormat,
    Defect,
    Library,
    Probe,
    Skill,
    Source,
    UnreadFile,
    names_of,
    slash_names_of,
)
from runner.corpus.settings import SETTINGS_FILE, Settings

# Eval files a skill folder may hold, and the shapes (runner.corpus.dialects) each name admits. Cases of the files
# named here keep their own ids in their uid; other files' cases are `<file stem>:<id>`.
NAMED_EVAL_FILES: dict[str, tuple[str, ...]] = {
    "evals.json": ("aegis-evals", "skill-creator", "trigger-set", "scenario", "skill-checks", "routing"),
    "trigger-evals.json": ("aegis-trigger", "trigger-set"),
    "trigger-queries.json": ("trigger-set",),
    "trigger_evals.json": ("trigger-set",),
    "eval.json": ("skill-creator", "trigger-set", "skill-checks", "routing"),
}
OTHER_EVAL_FILES = ("scenario", "skill-creator", "trigger-set", "routing", "skill-checks")
# Trigger sets some libraries keep at a skill's root rather than in its evals/ (read like those in evals/).
ROOT_TRIGGER_FILES = ("trigger-evals.json", "trigger_evals.json", "trigger-eval.json")
SHAPE_NAMES = {"aegis-evals": "Aegis evals.json (`{skill, cases}`)",
               "aegis-trigger": "Aegis trigger-evals.json (`{skill, cases}` with expected_skill)",
               "skill-creator": "skill-creator evals (`{skill_name, evals}` or a list of `{id, prompt, ...}`)",
               "trigger-set": "a trigger query set (a list of `{query, should_trigger}`)",
               "scenario": "scenarios (`{skills, query, files, expected_behavior}`)",
               "routing": "a routing set (`{cases: [{id, prompt, expected}]}`)",
               "skill-checks": "cases naming the skill they check (`{evals: [{prompt, checks: {skill_invoked}}]}`)"}
SOURCE_OF: dict[str, Source] = {"aegis-evals": "evals", "skill-creator": "evals", "aegis-trigger": "trigger",
                                "trigger-set": "trigger", "scenario": "scenario", "routing": "routing",
                                "skill-checks": "evals"}
FORMAT_OF: dict[str, CaseFormat] = {"aegis-evals": "aegis", "aegis-trigger": "aegis", "skill-creator": "skill-creator",
                                    "trigger-set": "trigger-set", "scenario": "scenario", "routing": "routing",
                                    "skill-checks": "skill-checks"}


# ---- finding the library ----------------------------------------------------------------------

def find_root(path: Path) -> tuple[Path, Path | None]:
    """(repository root, the folder --library named inside it, if any). Raises LibraryError (runner.corpus.layout)."""
    located = locate(path)
    return located.root, located.named or located.single


# ---- reading files ----------------------------------------------------------------------------

def _file_digest(path: Path, policy: ReadPolicy) -> bytes | None:
    """sha256 of a regular file inside the library within its size bound; None for anything else (a FIFO, a device,
    a link that leaves the library, a file too large: what no session receives either)."""
    if not policy.inside(path):
        return None
    try:
        return hashlib.sha256(bounded.read_bytes(path, policy.max_bytes)).digest()
    except OSError:
        return None


def _content_hash(folders: list[Path], files: list[Path], policy: ReadPolicy) -> str:
    """sha256 over every file's relative path and bytes, in a stable order (what a plan pins). A name that is not
    UTF-8 is hashed as the bytes it is (surrogateescape): renaming it changes the hash like any other rename."""
    digest = hashlib.sha256()
    paths = list(files)
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames.sort()
            paths += [Path(dirpath) / name for name in sorted(filenames)]
    for path in paths:
        file_digest = _file_digest(path, policy)
        if file_digest is not None:
            digest.update(display_path(path, policy.base).encode("utf-8", "surrogateescape") + b"\0")
            digest.update(file_digest)
    return digest.hexdigest()


def _case_errors(paths: set[tuple[Any, ...]], list_key: str, index: int) -> list[tuple[Any, ...]]:
    return [p[2:] for p in paths if p[:2] == (list_key, index)]


def _owner_and_target(item: dialects.Item, the_shape: str, skill: str) -> tuple[str, str]:
    """A routing case belongs to the skill it expects, or to the library when it expects none (then any
    library skill firing is its loss); every other case to the skill whose folder holds its file."""
    if item.kind == "routing":
        # Routing assertions in a skill's file stay that skill's case (as a deferral does); in a library-level
        # routing set the case belongs to the first skill that must fire, or to the library when none must.
        if skill != LIBRARY_OWNER:
            return skill, item.target or skill
        return (item.target, item.target) if item.target else (LIBRARY_OWNER, ANY_SKILL)
    if the_shape == "routing":
        return (LIBRARY_OWNER, ANY_SKILL) if item.kind == "no_trigger" else (item.target or skill, item.target or skill)
    if the_shape == "skill-checks":  # a case naming the skill it checks is that skill's, wherever its file is
        return item.target or skill, item.target or skill
    return skill, item.target or skill


def _case_at(prefix: tuple[Any, ...], uids: dict[int, str], single: bool = False
             ) -> Callable[[tuple[Any, ...]], str | None]:
    """The uid of the case an error path lies in: `prefix` + (index, ...) names item `index`; a file that is
    one case (`single`) owns every path. None outside any named case (the file's own error)."""
    def case_at(path: tuple[Any, ...]) -> str | None:
        if single:
            return uids.get(0)
        if path[:len(prefix)] != prefix or len(path) <= len(prefix) or not isinstance(path[len(prefix)], int):
            return None
        return uids.get(path[len(prefix)])
    return case_at


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Loader:
    """One pass over the library; collects models and findings. Private: use `load_library`."""

    def __init__(self, root: Path, layout: Layout, settings: Settings, settings_shown: str):
        self.root = root
        self.layout = layout
        self.settings_shown = settings_shown
        self.settings = settings
        # Reads may go anywhere in the repository but its .git folder (runner.corpus.files).
        self.policy = make_policy([root], root, settings.limits.max_file_bytes)
        self.rules = classify.packaged_rules()
        self.findings: list[Finding] = []
        self.cases: list[Case] = []
        self.template_cases: list[Case] = []
        self.probes: list[Probe] = []
        self.kept: dict[str, tuple[str, int]] = {}  # uid -> where it was read first
        # The real path of every eval file reached -> (the path it was first read by, whose it was): one file is one
        # set of cases however many ways lead to it (a link, a second root, a [[trigger_set]] entry).
        self.read_by: dict[str, tuple[str, str]] = {}
        # Every name of the library (runner.corpus.classify: only an assertion naming one is about activation).
        self.names: frozenset[str] = frozenset()
        self.name_map: dict[str, str] = {}  # every name of a skill -> its folder name
        self.unread: list[UnreadFile] = []
        self.outside: dict[str, list[Path]] = {}  # skill -> its eval files of `…/evals/<skill>/` (runner.corpus.outside)
        self.canonical: dict[str, str] = {}  # each of those names -> the name cases use (runner.corpus.kind_words)
        # Every name a slash command may use for a skill -> its folder name (runner.corpus.slash).
        self.slash_names: dict[str, str] = {}

    def show(self, path: Path) -> str:
        return self.policy.show(path)

    # -- skills --
    def is_template(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.settings.library.templates)

    def about(self, skill: str, start: int) -> None:
        """The findings since `start` are about this skill (an error keeps its cases from running)."""
        for finding in self.findings[start:]:
            if finding.skill is None:
                finding.skill = skill

    def load_skill(self, found: SkillFolder) -> Skill:
        """The skill itself (its SKILL.md); its cases come later (`load_cases`), once every name is known."""
        start = len(self.findings)
        folder = Path(found.path)
        skill_md = folder / "SKILL.md"
        skill = Skill(name=found.name, dir=self.show(folder), path=str(folder), root=found.root, plugin=found.plugin,
                      skill_md=self.show(skill_md), template=self.is_template(found.name), files=self.files_of(folder))
        self._read_skill_md(skill_md, skill)
        self.about(skill.name, start)
        return skill

    def load_cases(self, skill: Skill) -> None:
        start = len(self.findings)
        self._load_cases(skill, Path(skill.path))
        self.about(skill.name, start)

    def _load_cases(self, skill: Skill, folder: Path) -> None:
        files = self.eval_files(folder)
        files += [(path, NAMED_EVAL_FILES.get(path.name, OTHER_EVAL_FILES)) for path in self.outside.get(skill.name, [])
                  if self.named(path, "an eval file", "each of its cases")]
        unreadable = False  # an eval file of the skill that gave no case: the skill does have one
        for path, admitted in files:
            marks = self.marks()
            self.load_eval_file(path, skill, admitted)
            unreadable |= self.stand_in(marks, skill, "file", relative_shown(self.show(path), skill.dir)
                                        or self.show(path), self.show(path), FILE_UNREADABLE)
        for path in outside.in_skill(folder):
            if os.path.realpath(path) not in self.read_by and self.policy.inside(path):
                self.not_read(path, outside.WHY_SUFFIX.get(path.suffix.lower(), "no rule reads a file of this name "
                                                           "here"), skill.name)
        if not skill.eval_files and not skill.template and not unreadable:
            # At the skill's SKILL.md: the file a finding names must exist (evals/evals.json is the one missing).
            self.findings.append(warning("evals-missing", skill.skill_md, 1,
                                         f"{skill.name} has no eval file (evals/evals.json or another the runner "
                                         "reads): it has no behaviour cases", skill=skill.name))
        probes_dir = folder / "evals" / "probes"
        if probes_dir.is_dir() and self.policy.inside(probes_dir):
            for probe_dir in sorted(p for p in probes_dir.iterdir() if p.is_dir() and self.policy.inside(p)):
                if self.named(probe_dir, "a probe folder", "the probe"):
                    self.load_probe(probe_dir, skill)

    def marks(self) -> tuple[int, int]:
        """Where the findings and the cases stand before a file is read (`stand_in`)."""
        return len(self.findings), len(self.cases) + len(self.template_cases)

    def stand_in(self, marks: tuple[int, int], skill: Skill, source: Source, case_id: str, shown: str,
                 rule: str) -> bool:
        """When reading a file gave errors and not one case, an invalid case that stands for the file: its cases'
        ids cannot be read, but the run must still show that something of this skill's was not run and why
        (seed 002). Its uid is `<skill>/file/<the file, relative to the skill>` (a probe keeps its own uid).
        True when the file has one (made now, or kept from an earlier read of the same uid)."""
        findings, cases = marks
        errors = [f for f in self.findings[findings:] if f.level is Level.ERROR]
        if not errors or len(self.cases) + len(self.template_cases) > cases:
            return False
        first = min(errors, key=sort_key)
        case = Case(uid=self.uid(skill, source, case_id), skill=skill.name, source=source, id=case_id, file=shown,
                    line=first.line if first.file == shown else 1, format="probe" if source == "probe" else "file",
                    prompt="", target=skill.name, kind="invalid", kind_rule=rule)
        if case.uid not in self.kept:
            self.kept[case.uid] = (shown, case.line)
            (self.template_cases if skill.template else self.cases).append(case)
        return True

    @staticmethod
    def present(path: Path) -> bool:
        return path.exists() or path.is_symlink()

    def named(self, path: Path, what: str, whose: str) -> bool:
        """True when the name is UTF-8. An eval file or a probe folder whose name is not cannot be read: its cases'
        uids are made of it, and no plan, results file or report can hold them. That is an error of its skill
        (held back, as for an eval file that cannot be read); the path is shown escaped."""
        if is_unicode(path.name):
            return True
        self.findings.append(error(
            NAME_NOT_UTF8, self.show(path), 1,
            f"{what} whose name is not valid UTF-8 (shown escaped): {whose} would be named by it, and no uid, "
            "results file or report can hold that name, so it is not read. Rename it in UTF-8"))
        return False

    def eval_files(self, folder: Path) -> list[tuple[Path, tuple[str, ...]]]:
        """Each eval file of a skill folder (and of the repository's evals/ for a single skill), with the
        shapes its name admits. JSON files of evals/ and evaluations/ that are not named are read by shape."""
        out: list[tuple[Path, tuple[str, ...]]] = []
        for evals_dir in [folder / "evals", *(self.root / extra for extra in self.layout.evals_dirs)]:
            if not evals_dir.is_dir() or not self.policy.inside(evals_dir):
                continue
            out += [(evals_dir / name, admitted) for name, admitted in NAMED_EVAL_FILES.items()
                    if self.present(evals_dir / name)]
            out += [(path, OTHER_EVAL_FILES) for path in sorted(evals_dir.glob("*.json"))
                    if path.name not in NAMED_EVAL_FILES]
        for name in ("evals.json", "eval.json"):
            if self.present(folder / name):
                out.append((folder / name, ("skill-creator", "trigger-set", "aegis-evals", "scenario", "skill-checks",
                                            "routing")))
        out += [(folder / name, ("trigger-set",)) for name in ROOT_TRIGGER_FILES if self.present(folder / name)]
        evaluations = folder / "evaluations"
        if evaluations.is_dir() and self.policy.inside(evaluations):
            out += [(path, ("scenario", "skill-creator")) for path in sorted(evaluations.glob("*.json"))]
        return [(path, admitted) for path, admitted in out if self.named(path, "an eval file", "each of its cases")]

    def not_read(self, path: Path, reason: str, skill: str | None = None, finding: bool = True) -> None:
        """An eval-looking file found and not read: listed (census) and, unless a finding said so already, a finding
        (a warning in a skill's folder, where it would be that skill's; a note elsewhere)."""
        shown = self.show(path)
        self.unread.append(UnreadFile(file=shown, reason=reason))
        if finding:
            self.findings.append((warning if skill else info)(
                "eval-file-not-read", shown, 1, f"found, not read: {reason}", skill=skill))

    def first_read(self, path: Path, owner: str) -> tuple[str, str] | None:
        """None the first time a file is reached (it is then `owner`'s); afterwards (as first read, whose)."""
        real = os.path.realpath(path)
        if real in self.read_by:
            return self.read_by[real]
        self.read_by[real] = (self.show(path), owner)
        return None

    def read_again(self, path: Path, skill: Skill) -> bool:
        """True when the file was read already: a finding says so, and its cases are not read a second time."""
        previous = self.first_read(path, skill.name)
        if previous is None:
            return False
        first, owner = previous
        shown = self.show(path)
        if owner == skill.name:
            self.findings.append(info(
                "eval-file-read-once", shown, 1,
                f"{shown} is {first} reached a second way (a link); one file is one set of cases, read once as "
                f"{first}", skill=skill.name))
        else:
            self.findings.append(warning(
                "eval-file-read-once", shown, 1,
                f"{shown} is {first}, read already as {owner}'s eval file; one file is one set of cases, so it is "
                f"not read again as {skill.name}'s (give {skill.name} its own file to test it)", skill=skill.name))
        return True

    def load_eval_file(self, path: Path, skill: Skill, admitted: tuple[str, ...]) -> None:
        """Read one eval file in whichever admitted shape it has; a file in no admitted shape is a finding."""
        if self.read_again(path, skill):
            return
        doc, problems = jsonfile.read(path, self.policy)
        self.findings.extend(problems)
        if doc is None:
            self.not_read(path, "it cannot be read as JSON (the error at it says why)", finding=False)
            return
        shown = self.show(path)
        the_shape, why = dialects.shape(doc.data, path.name)
        if the_shape not in admitted:
            named = path.name in NAMED_EVAL_FILES or path.parent.name == "evaluations"
            described = ", ".join(SHAPE_NAMES[a] for a in admitted)
            message = (f"{path.name} is {why}" + (f" (a {SHAPE_NAMES[the_shape]}, not read here)" if the_shape else "")
                       + f"; the runner reads {described} here, so no case in it is run")
            self.findings.append((error if named else warning)("eval-format-unknown", shown, 1, message))
            self.not_read(path, f"it is {why}, not a shape read here", finding=False)
            return
        skill.eval_files.append(shown)
        if the_shape == "aegis-evals":
            self._load_aegis_evals(doc, skill, shown)
        elif the_shape == "aegis-trigger":
            self._load_aegis_trigger(doc, skill, shown)
        else:
            prefix = "" if path.name in NAMED_EVAL_FILES else f"{path.stem}:"
            self._load_items(doc, skill, shown, the_shape, prefix, path.stem)

    def files_of(self, folder: Path) -> list[str]:
        """Every file of a skill folder, relative to it. Only a symlink can lead outside the repository, so
        only links are checked (a realpath per file costs seconds on a large library)."""
        out: list[str] = []
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if not (here / d).is_symlink() or self.policy.inside(here / d))
            out.extend(printable((here / name).relative_to(folder).as_posix()) for name in sorted(filenames)
                       if not (here / name).is_symlink() or self.policy.inside(here / name))
            # The answer key (evals/, evaluations/) never reaches a session; its eval files and probe folders are
            # the loader's to name (`named`). Elsewhere a name that is not UTF-8 reaches sessions as it is (its
            # bytes name it) and only what is shown is escaped: a warning, once per folder.
            if here.relative_to(folder).parts[:1] not in (("evals",), ("evaluations",)):
                for name in sorted(n for n in dirnames + filenames if not is_unicode(n)):
                    self.findings.append(warning(
                        NAME_NOT_UTF8, self.show(here / name), 1,
                        "a file or folder of the skill whose name is not valid UTF-8: sessions receive it as it "
                        "is, reports show its name escaped; rename it in UTF-8 so that both agree"))
            dirnames[:] = [d for d in dirnames if is_unicode(d)]
        return out

    def _read_skill_md(self, path: Path, skill: Skill) -> None:
        text, problem = read_text(path, self.policy)
        if problem:
            self.findings.append(problem)
            return
        fm, problem = frontmatter.parse(text or "", skill.skill_md)
        if problem:
            self.findings.append(problem)
            return
        assert fm is not None
        skill.frontmatter_ok = True
        skill.fields = fm.fields
        skill.key_lines = fm.key_lines
        skill.description = fm.fields.get("description") if isinstance(fm.fields.get("description"), str) else None
        skill.manual_only = fm.fields.get("disable-model-invocation") is True
        skill.body, skill.body_line = fm.body, fm.body_line
        skill.shape_literals = classify.shape_literals(fm.body)

    # -- cases --
    def uid(self, skill: Skill, source: Source, case_id: str) -> str:
        return f"{skill.name}/{source}/{case_id}"

    def keep(self, case: Case, skill: Skill, seen: dict[str, int]) -> None:
        if case.id in seen:
            self.findings.append(error(
                "duplicate-id", case.file, case.line,
                f"case id {case.id!r} is used twice in this file (first at line {seen[case.id]}); "
                "neither is run until ids are unique (results are kept by id)", uid=case.uid))
            return
        first = self.kept.get(case.uid)
        if first is not None:
            self.findings.append(error(
                "duplicate-id", case.file, case.line,
                f"case {case.uid!r} is also defined at {first[0]}:{first[1]}; neither is run until the ids differ "
                "(results are kept by uid)", uid=case.uid))
            return
        seen[case.id] = case.line
        self.kept[case.uid] = (case.file, case.line)
        (self.template_cases if skill.template else self.cases).append(case)

    def assertions(self, texts: Any, doc: jsonfile.JsonDocument, pointer: list[Any], skill: Skill,
                   uid: str) -> list[Assertion]:
        written = [(text, doc.line(*pointer, index)) if isinstance(text, str) else (None, 0)
                   for index, text in enumerate(texts if isinstance(texts, list) else [])]
        return self.classified(written, skill, uid)

    def classified(self, written: Sequence[tuple[str | None, int]], skill: Skill, uid: str) -> list[Assertion]:
        """Assertions with their class (runner.corpus.classify), from (text, line) in the order written; a position
        without text (None) keeps its index, so overrides and reports count as the author does."""
        overrides = {o.index: o for o in self.settings.assertion_override if o.uid == uid}
        out = []
        for index, (text, line) in enumerate(written, start=1):
            if text is None:
                continue
            decision = classify.assertion_class(text, skill.shape_literals, self.rules, self.names)
            cls, rule, hooks = decision.assertion_class, decision.rule, list(decision.hooks)
            shape_only = decision.shape_only
            if index in overrides:
                cls, rule, shape_only = overrides[index].assertion_class, "override", False
            out.append(Assertion(index=index, text=text, line=line, assertion_class=cls, class_rule=rule, hooks=hooks,
                                 shape_only=shape_only))
        return out

    def check_owner(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str, key: str) -> None:
        owner = doc.data.get(key) if isinstance(doc.data, dict) else None
        if isinstance(owner, str) and owner not in (skill.name, skill.folder_name):
            self.findings.append(error(
                "skill-field-mismatch", shown, doc.line(key),
                f"`{key}` is {owner!r} but the file lives in {skill.name}/; cases are keyed by folder, so "
                "set it to the folder name"))

    def case_locator(self, doc: jsonfile.JsonDocument, list_key: str, skill: Skill, source: Source
                     ) -> Callable[[tuple[Any, ...]], str | None]:
        """For schema findings of an Aegis file: the uid of the case an error path is inside."""
        items = doc.data.get(list_key) if isinstance(doc.data, dict) else None
        uids: dict[int, str] = {}
        for index, raw in enumerate(items if isinstance(items, list) else []):
            case_id = raw.get("id") if isinstance(raw, dict) else None
            if isinstance(case_id, str) and case_id:
                uids[index] = self.uid(skill, source, case_id)
        return self.scoped(doc, _case_at((list_key,), uids))

    @staticmethod
    def scoped(doc: jsonfile.JsonDocument, case_at: Callable[[tuple[Any, ...]], str | None]
               ) -> Callable[[tuple[Any, ...]], str | None]:
        """A lone surrogate inside a case is that case's error (only that case is held back: its text cannot be
        sent as written); outside every case, its file's (the skill's). Returns `case_at` for the schema check."""
        for path, finding in doc.escaped:
            finding.uid = finding.uid or case_at(path)
        return case_at

    def _load_aegis_evals(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str) -> None:
        problems, paths = schemas.check(doc, schemas.AEGIS_EVALS, shown, "eval-schema",
                                        self.case_locator(doc, "cases", skill, "evals"))
        self.findings.extend(problems)
        self.check_owner(doc, skill, shown, "skill")
        seen: dict[str, int] = {}
        for index, raw in enumerate(doc.data["cases"] if isinstance(doc.data["cases"], list) else []):
            case_id = raw.get("id") if isinstance(raw, dict) else None
            if not isinstance(case_id, str) or not case_id:
                continue  # cannot be named, so cannot be reported per case; the schema finding says why
            expect = raw.get("expect") if isinstance(raw.get("expect"), dict) else {}
            uid = self.uid(skill, "evals", case_id)
            kind, rule = classify.evals_case_kind(raw.get("type"), case_id, self.settings.classify)
            errors = _case_errors(paths, "cases", index)
            if kind != "unknown" and errors:
                kind, rule = "invalid", "schema-invalid"
            triggers = expect.get("triggers") if isinstance(expect.get("triggers"), bool) else None
            case = Case(
                uid=uid, skill=skill.name, source="evals", id=case_id, file=shown, line=doc.line("cases", index),
                format="aegis", prompt=_text(raw.get("prompt")) or "", case_type=_text(raw.get("type")),
                triggers=triggers, target=skill.name,
                assertions=self.assertions(expect.get("assertions"), doc, ["cases", index, "expect", "assertions"],
                                           skill, uid),
                kind=kind, kind_rule=rule,
            )
            self._check_type_triggers(case)
            self.keep(case, skill, seen)

    def _check_type_triggers(self, case: Case) -> None:
        expected = {"should_trigger": True, "should_not_trigger": False, "should_not_do": True}.get(case.case_type or "")
        if expected is not None and case.triggers is not None and case.triggers != expected:
            self.findings.append(error(
                "type-triggers-conflict", case.file, case.line,
                f"case {case.id!r} is typed {case.case_type} but expect.triggers is {str(case.triggers).lower()}; "
                "make them agree (the runner will not guess which one is meant)", uid=case.uid))
            case.kind, case.kind_rule = "invalid", "type-triggers-conflict"

    def _load_items(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str, the_shape: str, prefix: str,
                    stem: str) -> None:
        """The cases of a skill-creator, trigger-set, scenario or routing file (runner.corpus.dialects)."""
        source = SOURCE_OF[the_shape]
        list_key, entries = dialects.items(doc.data, the_shape)
        single = list_key == ""  # one scenario: the file itself
        base = () if single or list_key is None else (list_key,)

        def pointer_of(index: int) -> tuple[Any, ...]:
            return () if single else (*base, index)
        items = {index: self.item(raw, the_shape, pointer_of(index), index, skill)
                 for index, raw in enumerate(entries) if isinstance(raw, dict)}
        if the_shape in ("skill-creator", "scenario"):
            for index, item in items.items():
                if slash.invoked_skill(item.prompt, self.slash_names) != skill.name:
                    kind_words.refine(item, entries[index], skill.name, self.rules, self.canonical)
                    continue
                # A prompt that invokes its own skill by hand is no routing question: the skill fires, and what the
                # words say of not firing or deferring is the outcome judged on the answer. Only the reading's kind
                # is kept (classify.invocation_kind makes it a refusal below), never a new target.
                read = dataclasses.replace(item)
                kind_words.refine(read, entries[index], skill.name, self.rules, self.canonical)
                item.kind, item.kind_rule = read.kind, read.kind_rule
        case_ids = {index: (stem if single else f"{stem}:{item.id}") if the_shape == "scenario" else f"{prefix}{item.id}"
                    for index, item in items.items() if item.id}
        owners = {index: _owner_and_target(items[index], the_shape, skill.name) for index in case_ids}
        uids = {index: f"{owners[index][0]}/{source}/{case_id}" for index, case_id in case_ids.items()}
        problems, paths = schemas.check(doc, dialects.SCHEMA_OF[the_shape], shown, "eval-schema",
                                        self.scoped(doc, _case_at(base, uids, single)))
        self.findings.extend(problems)
        self.report_unused(doc, entries, the_shape, shown, pointer_of)
        if the_shape == "skill-creator":
            self.check_owner(doc, skill, shown, "skill_name")
        seen: dict[str, int] = {}
        for index, case_id in case_ids.items():
            pointer = pointer_of(index)
            invalid = any(p[:len(pointer)] == pointer for p in paths)
            owner, target = owners[index]
            self.keep(self.item_case(entries[index], items[index], the_shape, skill, shown, doc, pointer, case_id,
                                     owner, target, invalid), skill, seen)

    def item(self, raw: dict[str, Any], the_shape: str, pointer: tuple[Any, ...], index: int, skill: Skill) -> dialects.Item:
        if the_shape == "skill-checks":
            return dialects.checks_item(raw, index, None if skill.name == LIBRARY_OWNER else skill.name, self.name_map)
        if the_shape == "skill-creator":
            item = dialects.creator_item(raw, pointer, index)
        elif the_shape == "trigger-set":
            return dialects.trigger_item(raw, index)
        elif the_shape == "scenario":
            return dialects.scenario_item(raw, pointer, index, skill.name)
        else:
            item = dialects.routing_item(raw, index)
        if dialects.has_routing(raw):
            # Routing assertions make the case a routing case, whatever else decided its kind (the author wrote which
            # skills fire); a file of the library's own (a routing set at the repository's evals/) has no own skill.
            own = None if skill.name == LIBRARY_OWNER else skill.name
            dialects.read_routing(item, raw, pointer, own, routing_set=the_shape == "routing")
        return item

    def item_case(self, raw: dict[str, Any], item: dialects.Item, the_shape: str, skill: Skill, shown: str,
                  doc: jsonfile.JsonDocument, pointer: tuple[Any, ...], case_id: str, owner: str, target: str,
                  invalid: bool) -> Case:
        source = SOURCE_OF[the_shape]
        uid = f"{owner}/{source}/{case_id}"
        kind, rule = classify.invocation_kind(item.kind, item.kind_rule,
                                              slash.invoked_skill(item.prompt, self.slash_names) == target)
        if invalid and kind != "unknown":
            kind, rule = "invalid", "schema-invalid"
        written = [(text, doc.line(*where)) for (text, _), where in zip(item.assertions, item.assertion_keys)]
        written += [(f"Invokes `{name}`.", doc.line(*pointer, "skills")) for name in item.also_fire]
        case = Case(
            uid=uid, skill=owner, source=source, id=case_id, file=shown, line=doc.line(*pointer),
            format=FORMAT_OF[the_shape], prompt=item.prompt, case_type=_text(raw.get("type") or raw.get("kind")),
            triggers=None if kind in ("unknown", "invalid") else kind != "no_trigger", target=target,
            should_not_trigger=item.should_not_trigger, files=item.files,
            files_dir=skill.path if item.files else None, expected_output=item.expected_output, note=item.note,
            assertions=self.classified(written, skill, uid), kind=kind, kind_rule=rule, label=item.label,
            routing=item.routing if kind == "routing" else None,
            lines={"expected_skill": doc.line(*pointer, next((k for k in dialects.EXPECTED_KEYS if k in raw), "id")),
                   **{f"should_not_trigger/{i}": doc.line(*pointer) for i in range(len(item.should_not_trigger))},
                   **{key: doc.line(*where) for key, where in item.routing_where.items()}},
        )
        if kind == "unknown":
            written_type = rule.split(":", 1)[1]
            near = tags.read_type(written_type.split("=", 1)[1], dialects.TRIGGER_TYPES, dialects.NEGATIVE_TYPES).near
            self.findings.append(error(
                "unknown-case-type", shown, doc.line(*pointer, "type" if "type" in raw else "kind"),
                f"case {case_id!r}: {written_type} looks like a case kind (close to {near!r}) that the runner does not "
                "know (it reads negative, anti, no_trigger, should_not_trigger as negative controls and standard, "
                "positive, boundary, edge, trigger as trigger cases; a value like no kind name is a category tag); "
                "the case is not run (UNRUN unknown-case-type)", uid=uid))
        if item.problem and not invalid:  # a value of the wrong type is the schema's finding already
            self.findings.append(error("eval-schema", shown, doc.line(*(item.problem_at or pointer)),
                                       f"case {case_id!r}: {item.problem}", uid=uid))
        return case

    def report_unused(self, doc: jsonfile.JsonDocument, entries: list[Any], the_shape: str, shown: str,
                      pointer_of: Callable[[int], tuple[Any, ...]]) -> None:
        """A key no reader uses is a warning naming it (the case still loads): a typo, or a field this runner
        does not read."""
        known = {"skill-creator": dialects.CREATOR_KEYS, "trigger-set": dialects.TRIGGER_KEYS,
                 "scenario": dialects.SCENARIO_KEYS, "routing": dialects.ROUTING_KEYS,
                 "skill-checks": dialects.CHECKS_KEYS}[the_shape]
        for key, index in dialects.unused_keys(entries, known):
            self.findings.append(warning(
                "eval-unknown-key", shown, doc.line(*pointer_of(index), key),
                f"key {key!r} is not read by the runner ({SHAPE_NAMES[the_shape]}); the case loads without it"))
        if the_shape in ("skill-creator", "routing"):
            # `mode` is read only beside routing keys (waza's order rule); alone it is some other tool's key.
            lone = next((index for index, entry in enumerate(entries) if isinstance(entry, dict) and "mode" in entry
                         and not dialects.has_routing(entry)), None)
            if lone is not None:
                self.findings.append(warning(
                    "eval-unknown-key", shown, doc.line(*pointer_of(lone), "mode"),
                    "key 'mode' is read only beside routing keys (required_skills, must_include, ...), as waza's "
                    "order rule; here it is not read and the case loads without it"))
        if the_shape == "skill-checks":
            checks = [entry.get("checks") if isinstance(entry, dict) else None for entry in entries]
            for key, index in dialects.unused_keys(checks, dialects.CHECKS_READ):  # once per key and file
                self.findings.append(warning(
                    "eval-unknown-key", shown, doc.line(*pointer_of(index), "checks", key),
                    f"check {key!r} is not read by the runner (it reads checks.skill_invoked); the case is "
                    "decided without it"))
        if the_shape == "skill-creator" and isinstance(doc.data, dict):
            for key in doc.data:
                if key not in dialects.CREATOR_TOP_KEYS:
                    self.findings.append(warning("eval-unknown-key", shown, doc.line(key),
                                                 f"top-level key {key!r} is not read by the runner"))

    def read_checked(self, path: Path, schema_name: str, rule: str, policy: ReadPolicy | None = None
                     ) -> tuple[jsonfile.JsonDocument, set[tuple[Any, ...]], str] | None:
        """Read a JSON file and check it against its schema; None when it cannot be parsed."""
        policy = policy or self.policy
        doc, problems = jsonfile.read(path, policy)
        self.findings.extend(problems)
        if doc is None:
            return None
        shown = policy.show(path)
        problems, paths = schemas.check(doc, schema_name, shown, rule)
        self.findings.extend(problems)
        return doc, paths, shown

    def _load_aegis_trigger(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str) -> None:
        problems, paths = schemas.check(doc, schemas.AEGIS_TRIGGER, shown, "eval-schema",
                                        self.case_locator(doc, "cases", skill, "trigger"))
        self.findings.extend(problems)
        if not isinstance(doc.data, dict):
            return
        self.check_owner(doc, skill, shown, "skill")
        skill.trigger_file = shown
        overlaps = doc.data.get("overlaps_with")
        if isinstance(overlaps, list):
            for index, name in enumerate(overlaps):
                if isinstance(name, str):
                    skill.overlaps_with.append(name)
                    skill.overlaps_lines.append(doc.line("overlaps_with", index))
        seen: dict[str, int] = {}
        raw_cases = doc.data.get("cases")
        for index, raw in enumerate(raw_cases if isinstance(raw_cases, list) else []):
            case_id = raw.get("id") if isinstance(raw, dict) else None
            if not isinstance(case_id, str) or not case_id:
                continue
            errors = _case_errors(paths, "cases", index)
            case = Case(
                uid=self.uid(skill, "trigger", case_id), skill=skill.name, source="trigger", id=case_id, file=shown,
                line=doc.line("cases", index), format="aegis", prompt=_text(raw.get("prompt")) or "",
                target=self.own_name(_text(raw.get("expected_skill")) or "", skill),
                should_not_trigger=_strings(raw.get("should_not_trigger")),
                reason=_text(raw.get("reason")), note=_text(raw.get("note")),
                kind="invalid" if errors else "discrimination",
                kind_rule="schema-invalid" if errors else "source:trigger-evals",
                lines=self.ref_lines(doc, index, raw),
            )
            self.keep(case, skill, seen)

    @staticmethod
    def own_name(name: str, skill: Skill) -> str:
        """The file's own skill named as its author wrote it (`seo` in `web-kit:seo`'s files) is that skill."""
        return skill.name if name == skill.folder_name else name

    @staticmethod
    def ref_lines(doc: jsonfile.JsonDocument, index: int, raw: dict[str, Any]) -> dict[str, int]:
        lines = {"expected_skill": doc.line("cases", index, "expected_skill")}
        for position, _ in enumerate(_strings(raw.get("should_not_trigger"))):
            lines[f"should_not_trigger/{position}"] = doc.line("cases", index, "should_not_trigger", position)
        return lines

    # -- probes --
    def load_probe(self, probe_dir: Path, skill: Skill) -> None:
        marks = self.marks()
        self._load_probe(probe_dir, skill)
        for finding in self.findings[marks[0]:]:
            finding.uid = finding.uid or self.uid(skill, "probe", probe_dir.name)
        self.stand_in(marks, skill, "probe", probe_dir.name, self.show(probe_dir / "probe.json"), PROBE_UNREADABLE)

    def _load_probe(self, probe_dir: Path, skill: Skill) -> None:
        probe_file, question_file = probe_dir / "probe.json", probe_dir / "question.md"
        if not probe_file.exists():
            self.findings.append(error("probe-missing-file", self.show(probe_dir), 1,
                                       f"probe folder {probe_dir.name}/ has no probe.json"))
            return
        checked = self.read_checked(probe_file, schemas.PROBE, "probe-schema")
        question, problem = read_text(question_file, self.policy) if (
            question_file.exists() or question_file.is_symlink()) else (None, error(
                "probe-missing-file", self.show(probe_dir), 1,
                f"probe folder {probe_dir.name}/ has no question.md (the work artifact)"))
        if problem:
            self.findings.append(problem)
        if checked is None:
            return
        doc, paths, shown = checked
        data = doc.data
        if question is None or not isinstance(data, dict) or paths:
            return  # the probe cannot be built; the findings above say why
        try:  # read again for its bytes as written (the digest calibration records pin), within the same bounds
            written = bounded.read_bytes(probe_file, self.policy.max_bytes)
        except OSError as exc:  # replaced since it was read
            self.findings.append(error("not-a-file", shown, 1, f"probe.json cannot be read again: {exc}"))
            return
        digest = hashlib.sha256(written + b"\0" + question.encode()).hexdigest()
        try:
            probe = Probe(
                uid=self.uid(skill, "probe", probe_dir.name), skill=skill.name, id=probe_dir.name,
                dir=self.show(probe_dir), file=shown, question_file=self.show(question_file), kind=data["kind"],
                seeded_defects=data["seeded_defects"],
                defects=[Defect(line=doc.line("defects", i), **d) for i, d in enumerate(data["defects"])],
                modifiers=data.get("modifiers", []), act=data["discriminator"]["act"],
                patterns=data["discriminator"].get("patterns", []), question=question, content_hash=digest,
                lines={k: doc.line(k) for k in data},
            )
        except ValidationError as exc:
            # The schema is the contract; this is a second line for values it admits but a model
            # cannot hold (e.g. 1e+20 as an integer).
            self.findings.append(error("probe-schema", shown, 1, f"probe.json cannot be read: {exc.errors()[0]['msg']}"))
            return
        if data["id"] != probe_dir.name:
            self.findings.append(error("probe-id-mismatch", shown, doc.line("id"),
                                       f"probe id {data['id']!r} differs from its folder {probe_dir.name!r}"))
        self.probes.append(probe)
        case = Case(uid=probe.uid, skill=skill.name, source="probe", id=probe.id, file=shown, line=1, format="probe",
                    prompt=question, target=skill.name, kind="probe", kind_rule="source:probe")
        (self.template_cases if skill.template else self.cases).append(case)

    def load_trigger_sets(self, skills: dict[str, Skill]) -> None:
        """skill-creator trigger sets named in the settings; `q<n>` ids (the format has none)."""
        policy = make_policy([self.root], self.root, self.settings.limits.max_file_bytes)
        for entry in self.settings.trigger_set:
            if problem := path_problem(entry.path):
                shown = entry.path if len(entry.path) <= 80 else entry.path[:77] + "..."
                self.findings.append(error("missing-file", self.settings_shown, 1,
                                           f"trigger_set names {shown!r}, which is not a usable path: {problem}"))
                continue
            path = self.root / entry.path
            skill = skills.get(entry.skill)
            if skill is None:
                self.findings.append(error("dangling-reference", self.settings_shown, 1,
                                           f"trigger_set names skill {entry.skill!r}, which is not in the library"))
                continue
            if not path.exists() and not path.is_symlink():
                self.findings.append(error("missing-file", self.settings_shown, 1,
                                           f"trigger_set file {entry.path} does not exist"))
                continue
            previous = self.first_read(path, skill.name)
            if previous is not None:
                # Found on its own before the settings were read: the file keeps the uids discovery gives it, so
                # naming it in the settings or not changes no case's uid.
                first, owner = previous
                same = first if first == entry.path else f"{first} (the same file)"
                self.findings.append((info if owner == skill.name else warning)(
                    "trigger-set-already-read", self.settings_shown, 1,
                    f"trigger_set names {entry.path}, which is read already as {owner}'s eval file {same}; one file "
                    "is one set of cases, so the entry adds no case and its cases keep the uids they have there" + (
                        "; the entry can go" if owner == skill.name else
                        f" (the entry says skill {skill.name!r}: move the file into that skill's evals/ to make it "
                        "its)")))
                continue
            start = len(self.findings)
            marks = self.marks()
            doc, problems = jsonfile.read(path, policy)
            self.findings.extend(problems)
            if doc is not None and dialects.shape(doc.data, path.name)[0] != "trigger-set":
                self.findings.append(error("eval-format-unknown", policy.show(path), 1,
                                           f"trigger_set file {entry.path} is {dialects.shape(doc.data, path.name)[1]},"
                                           " not a trigger query set (a list of `{query, should_trigger}`)"))
            elif doc is not None:
                skill.eval_files.append(policy.show(path))
                self._load_items(doc, skill, policy.show(path), "trigger-set", "", path.stem)
            for finding in self.findings[start:]:
                finding.skill = finding.skill or skill.name
            shown = policy.show(path)
            self.stand_in(marks, skill, "file", relative_shown(shown, skill.dir) or shown, shown, FILE_UNREADABLE)

    def load_outside(self, found: outside.Survey, skills: dict[str, Skill], scope: list[Path]) -> None:
        """Eval-looking files outside the skill folders that no folder name gives to a skill (runner.corpus.outside):
        routing sets at the repository's evals/ (their cases belong to the skill they expect, or to the library when
        they expect none) and files whose cases name the skill they check. Every other one inside `scope` (what
        --library names) is found and not read, with why."""
        def in_scope(path: Path) -> bool:
            return any(path.is_relative_to(folder) for folder in scope)
        for path, reason in found.unread:
            if in_scope(path):
                self.not_read(path, reason)
        library = Skill(name=LIBRARY_OWNER, dir="evals", path=str(self.root / "evals"), skill_md="")
        for path in found.loose:
            if os.path.realpath(path) in self.read_by or not in_scope(path):
                continue  # read already (a [[trigger_set]] entry, a single skill's evals/), or none of this library's
            if not is_unicode(path.name):
                # Its cases would be named by it (`<stem>:<id>`); a file of no skill: a warning, never a hold on all.
                self.findings.append(warning(NAME_NOT_UTF8, self.show(path), 1,
                                             "an eval file whose name is not valid UTF-8 (shown escaped): its cases "
                                             "would be named by it, so it is not read. Rename it in UTF-8"))
                continue
            self.first_read(path, LIBRARY_OWNER)
            doc, problems = jsonfile.read(path, self.policy)
            self.findings.extend(problems)
            if doc is None:
                self.not_read(path, "it cannot be read as JSON (the error at it says why)", finding=False)
                continue
            the_shape, why = dialects.shape(doc.data, path.name)
            mine = dialects.checks_owner(doc.data, self.name_map) if the_shape == "skill-checks" else None
            if the_shape == "routing" and path.parent == self.root / "evals":
                prefix = "" if path.stem == "routing" else f"{path.stem}:"
                self._load_items(doc, library, self.show(path), "routing", prefix, path.stem)
            elif the_shape == "skill-checks" and (mine or dialects.checks_targets(doc.data, self.name_map)):
                owner = skills[mine] if mine in skills else library
                start = len(self.findings)
                if mine in skills:
                    owner.eval_files.append(self.show(path))
                self._load_items(doc, owner, self.show(path), "skill-checks", f"{path.stem}:", path.stem)
                if mine in skills:
                    self.about(owner.name, start)
            elif path.parent == self.root / "evals":  # the rule routing sets have always had there
                reason = outside.why_unmapped(path, self.root, why)
                self.findings.append(warning("eval-format-unknown", self.show(path), 1,
                                             f"{path.name}: found, not read: {reason}"))
                self.not_read(path, reason, finding=False)
            else:
                self.not_read(path, outside.why_unmapped(path, self.root, why))

    def outside_files(self, skills: dict[str, Skill]) -> list[Path]:
        """Every file read or reached outside the skill folders (they define cases: the content hash covers them)."""
        folders = [os.path.realpath(skill.path) for skill in skills.values()]
        return sorted(Path(real) for real in self.read_by
                      if not any(Path(real).is_relative_to(folder) for folder in folders))

    # -- agents --
    def load_agents(self) -> dict[str, Agent]:
        return {name: Agent(name=name, file=self.show(Path(file))) for name, file in sorted(self.layout.agents.items())}

    # -- overrides --
    def apply_case_overrides(self) -> None:
        by_uid = {case.uid: case for case in self.cases}
        for override in self.settings.case_override:
            case = by_uid.get(override.uid)
            if case is None:
                self.findings.append(error("override-unknown-case", self.settings_shown, 1,
                                           f"case_override names {override.uid!r}, which is not a case of this "
                                           "library (uids are <skill>/<source>/<id>)"))
                continue
            if override.kind == "routing" and case.routing is None:
                # A routing case is graded on its routing assertions only: without any, nothing could fail.
                self.findings.append(error(
                    "override-routing-without-assertions", self.settings_shown, 1,
                    f"case_override makes {override.uid!r} a routing case, but it has no routing assertions "
                    "(must_include / must_not_include / max_skills / allow_extra, required_skills / "
                    "forbidden_skills): write them in the case; it is not run", uid=case.uid))
                case.kind, case.kind_rule = "invalid", "override"
                continue
            case.kind, case.kind_rule = override.kind, "override"
            if override.kind != "routing":
                case.routing = None  # the author's kind decides how it is graded
        known = {case.uid for case in self.cases}
        for assertion_override in self.settings.assertion_override:
            if assertion_override.uid not in known:
                self.findings.append(error("override-unknown-case", self.settings_shown, 1,
                                           f"assertion_override names {assertion_override.uid!r}, which is not a "
                                           "case of this library"))


def load_library(path: Path, settings: Settings, settings_file: Path | None = None) -> tuple[Library, list[Finding]]:
    """Read the library at `path` (a repository root, a folder of skills or one skill's folder; see
    runner.corpus.layout). Raises LibraryError only when there is no library there at all; everything else is
    a finding."""
    layout, layout_findings = discover(path, settings)
    root = Path(layout.root)
    settings_shown = display_path(settings_file, root) if settings_file else SETTINGS_FILE
    loader = _Loader(root, layout, settings, settings_shown)
    # The layout names the settings by their default name; `--config` may have named another file.
    loader.findings.extend(f.model_copy(update={"file": settings_shown}) if f.file == SETTINGS_FILE else f
                           for f in layout_findings)
    agents_dirs = [root / d for d in layout.agents_dirs]
    for folder in [Path(found.path) for found in layout.skills] + agents_dirs:
        loader.findings.extend(scan_tree(folder, loader.policy))
    skills = {found.name: loader.load_skill(found) for found in layout.skills}
    agents = loader.load_agents()
    loader.canonical = names_of(skills, agents)
    loader.names = frozenset(loader.canonical)
    loader.name_map = {name: folder for name, folder in names_of(skills, {}).items()}
    found = outside.survey(root, [Path(f.path) for f in layout.skills], loader.name_map, loader.policy)
    loader.outside = found.by_skill
    loader.slash_names = slash_names_of(skills)
    for skill in skills.values():
        loader.load_cases(skill)
    loader.load_trigger_sets(skills)
    # What --library names: a single skill or a folder of skills inside a repository is not the whole repository,
    # whose other eval files are none of its business (a file named after one of its skills still is its).
    scope = [root] if layout.kind not in FOLDER_LAYOUTS else [root / r for r in layout.roots]
    loader.load_outside(found, skills, scope)
    for case in loader.cases:
        case.workspace_signals = classify.workspace_signals(case.prompt, loader.rules) if case.source != "probe" else []
    loader.apply_case_overrides()
    folders = [Path(found.path) for found in sorted(layout.skills, key=lambda f: f.name)]
    library = Library(
        root=str(root), skills_dir=layout.roots[0] if layout.roots else ".",
        agents_dir=layout.agents_dirs[0] if layout.agents_dirs else None, layout=layout,
        settings_file=str(settings_file) if settings_file else None,
        content_hash=_content_hash(folders, [Path(f) for _, f in sorted(layout.agents.items())]
                                   + loader.outside_files(skills), loader.policy),
        skills=skills, agents=agents, cases=loader.cases, template_cases=loader.template_cases, probes=loader.probes,
        unread=loader.unread,
    )
    return library, loader.findings
