"""The corpus model: a library's skills, subagents, eval cases and probes, read as written.

`load_library` never raises on bad content: whatever cannot be read becomes a finding with its
file and line, and whatever can be read becomes a typed model. Case kinds and assertion classes
are decided here (by runner.classify) so that every later stage sees one settled corpus.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from runner import classify, frontmatter, jsonfile
from runner import schema_check as schemas
from runner.files import ReadPolicy, make_policy, read_text, scan_tree
from runner.findings import Finding, display_path, error, warning
from runner.settings import SETTINGS_FILE, Settings

Source = Literal["evals", "trigger", "probe"]
SUBAGENT_SUFFIX = " (subagent)"


class LibraryError(Exception):
    """The path does not hold a library at all (a usage error, exit 2)."""


class Assertion(BaseModel):
    index: int = Field(ge=1)
    text: str
    line: int
    assertion_class: str
    class_rule: str
    hooks: list[str] = []
    shape_only: bool = Field(default=False, description="Artifact shape and nothing more: the script decides it.")


class Case(BaseModel):
    uid: str
    skill: str = Field(description="The skill folder whose eval file holds the case.")
    source: Source
    id: str
    file: str
    line: int
    format: Literal["aegis", "skill-creator", "probe"]
    prompt: str
    case_type: str | None = None
    triggers: bool | None = None
    target: str = Field(description="The skill (or `<agent> (subagent)`) whose activation the case measures.")
    should_not_trigger: list[str] = []
    reason: str | None = None
    note: str | None = None
    files: list[str] = []
    expected_output: str | None = None
    assertions: list[Assertion] = []
    kind: str = Field(description="trigger | refusal | no_trigger | discrimination | probe | unknown | invalid")
    kind_rule: str
    workspace_signals: list[str] = []
    lines: dict[str, int] = Field(default_factory=dict,
                                  description="Line of fields that findings point at, e.g. `should_not_trigger/1`.")


class Defect(BaseModel):
    id: str
    shape: str
    locator: str
    caught_when: str
    line: int


class Probe(BaseModel):
    uid: str
    skill: str
    id: str
    dir: str
    file: str
    question_file: str
    kind: str
    seeded_defects: int
    defects: list[Defect]
    modifiers: list[str] = []
    act: str
    patterns: list[str] = []
    question: str
    content_hash: str
    lines: dict[str, int] = Field(default_factory=dict, description="Line of each top-level probe.json key.")


class Skill(BaseModel):
    name: str = Field(description="The folder name, the skill's canonical name.")
    dir: str
    skill_md: str
    fields: dict[str, Any] = {}
    key_lines: dict[str, int] = {}
    frontmatter_ok: bool = False
    description: str | None = None
    manual_only: bool = False
    template: bool = False
    body: str = Field(default="", description="SKILL.md after the frontmatter.")
    body_line: int = Field(default=1, description="Line of SKILL.md where the body starts.")
    files: list[str] = Field(default=[], description="Every file of the skill folder, relative to it (links that "
                                                      "leave the library excluded).")
    shape_literals: dict[str, list[str]] = {}
    overlaps_with: list[str] = []
    trigger_file: str | None = None
    overlaps_lines: list[int] = []
    eval_files: list[str] = []


class Agent(BaseModel):
    name: str
    file: str


class Library(BaseModel):
    root: str
    skills_dir: str
    agents_dir: str | None
    settings_file: str | None
    content_hash: str
    skills: dict[str, Skill]
    agents: dict[str, Agent]
    cases: list[Case]
    template_cases: list[Case] = []
    probes: list[Probe] = []


# ---- finding the library ----------------------------------------------------------------------

def _has_skill_folders(path: Path) -> bool:
    return path.is_dir() and any((child / "SKILL.md").exists() for child in path.iterdir() if child.is_dir())


def _git_toplevel(path: Path) -> Path | None:
    for candidate in [path, *path.parents]:
        if (candidate / ".git").exists():
            return candidate
    return None


def find_root(path: Path) -> tuple[Path, Path | None]:
    """(repository root, skills folder when the path named it) for `--library PATH`."""
    path = path.resolve()
    if not path.exists():
        raise LibraryError(f"{path}: no such file or folder")
    if not path.is_dir():
        raise LibraryError(f"{path}: --library needs a folder (a repository root or a skills folder)")
    if (path / SETTINGS_FILE).exists() or (path / ".claude" / "skills").is_dir() or (path / "skills").is_dir():
        return path, None
    if _has_skill_folders(path):
        if path.name == "skills" and path.parent.name in (".claude", "dot-claude"):
            return path.parent.parent, path
        return _git_toplevel(path) or path, path
    raise LibraryError(f"{path}: no skills found (looked for .claude/skills/, skills/, and folders holding SKILL.md)")


def find_skills_dir(root: Path, named: Path | None, settings: Settings) -> Path:
    if named is not None:
        return named
    if settings.library.skills:
        configured = (root / settings.library.skills).resolve()
        if not configured.is_dir():
            raise LibraryError(f"{configured}: the skills folder named by [library] skills in {SETTINGS_FILE} "
                               "does not exist")
        return configured
    for candidate in (root / ".claude" / "skills", root / "skills"):
        if candidate.is_dir():
            return candidate
    raise LibraryError(f"{root}: no skills folder (.claude/skills/ or skills/)")


# ---- reading files ----------------------------------------------------------------------------

def _content_hash(folders: list[Path], policy: ReadPolicy) -> str:
    """sha256 over every file's relative path and bytes, in a stable order (what a plan pins)."""
    digest = hashlib.sha256()
    for folder in folders:
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames.sort()
            for name in sorted(filenames):
                path = Path(dirpath) / name
                if not policy.inside(path) or not path.is_file() or path.stat().st_size > policy.max_bytes:
                    continue
                digest.update(display_path(path, policy.base).encode() + b"\0")
                digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


def _read_json(path: Path, policy: ReadPolicy) -> tuple[jsonfile.JsonDocument | None, list[Finding]]:
    text, problem = read_text(path, policy)
    if problem:
        return None, [problem]
    doc, problem = jsonfile.parse(text or "", policy.show(path))
    return doc, [problem] if problem else []


def _case_errors(paths: set[tuple[Any, ...]], list_key: str, index: int) -> list[tuple[Any, ...]]:
    return [p[2:] for p in paths if p[:2] == (list_key, index)]


def _case_errors_top(paths: set[tuple[Any, ...]], index: int) -> list[tuple[Any, ...]]:
    return [p for p in paths if p[:1] == (index,)]


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


class _Loader:
    """One pass over the library; collects models and findings. Private: use `load_library`."""

    def __init__(self, root: Path, skills_dir: Path, agents_dir: Path | None, settings: Settings,
                 settings_shown: str):
        self.root = root
        self.settings_shown = settings_shown
        self.skills_dir = skills_dir
        self.agents_dir = agents_dir
        self.settings = settings
        roots = [skills_dir] + ([agents_dir] if agents_dir else [])
        self.policy = make_policy(roots, root, settings.limits.max_file_bytes)
        self.rules = classify.packaged_rules()
        self.findings: list[Finding] = []
        self.cases: list[Case] = []
        self.template_cases: list[Case] = []
        self.probes: list[Probe] = []

    def show(self, path: Path) -> str:
        return self.policy.show(path)

    # -- skills --
    def is_template(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self.settings.library.templates)

    def skill_folders(self) -> list[Path]:
        folders = []
        for child in sorted(self.skills_dir.iterdir()):
            if child.name.startswith("."):
                continue
            if child.is_symlink() and not self.policy.inside(child):
                continue  # reported by scan_tree; never followed
            if child.is_dir():
                folders.append(child)
        return folders

    def load_skill(self, folder: Path) -> Skill:
        skill_md = folder / "SKILL.md"
        skill = Skill(name=folder.name, dir=self.show(folder), skill_md=self.show(skill_md),
                      template=self.is_template(folder.name), files=self.files_of(folder))
        if not skill_md.exists() and not skill_md.is_symlink():
            self.findings.append(error("skill-md-missing", skill.skill_md, 1,
                                       f"skill folder {folder.name}/ has no SKILL.md; the host will not list it"))
        else:
            self._read_skill_md(skill_md, skill)
        evals_dir = folder / "evals"
        evals_file, trigger_file = evals_dir / "evals.json", evals_dir / "trigger-evals.json"
        if evals_file.exists() or evals_file.is_symlink():
            skill.eval_files.append(self.show(evals_file))
            self.load_evals_file(evals_file, skill)
        elif not skill.template:
            self.findings.append(warning("evals-missing", self.show(evals_file), 1,
                                         f"{folder.name} has no evals/evals.json: it has no behaviour cases"))
        if trigger_file.exists() or trigger_file.is_symlink():
            skill.eval_files.append(self.show(trigger_file))
            self.load_trigger_file(trigger_file, skill)
        probes_dir = evals_dir / "probes"
        if probes_dir.is_dir() and self.policy.inside(probes_dir):
            for probe_dir in sorted(p for p in probes_dir.iterdir() if p.is_dir() and self.policy.inside(p)):
                self.load_probe(probe_dir, skill)
        return skill

    def files_of(self, folder: Path) -> list[str]:
        out = []
        for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if self.policy.inside(Path(dirpath) / d))
            out.extend((Path(dirpath) / name).relative_to(folder).as_posix() for name in sorted(filenames)
                       if self.policy.inside(Path(dirpath) / name))
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
                "the second case is not run until ids are unique"))
            return
        seen[case.id] = case.line
        (self.template_cases if skill.template else self.cases).append(case)

    def assertions(self, texts: Any, doc: jsonfile.JsonDocument, pointer: list[Any], skill: Skill,
                   uid: str) -> list[Assertion]:
        overrides = {o.index: o for o in self.settings.assertion_override if o.uid == uid}
        out = []
        for index, text in enumerate(texts if isinstance(texts, list) else [], start=1):
            if not isinstance(text, str):
                continue
            decision = classify.assertion_class(text, skill.shape_literals, self.rules)
            cls, rule, hooks = decision.assertion_class, decision.rule, list(decision.hooks)
            shape_only = decision.shape_only
            if index in overrides:
                cls, rule, shape_only = overrides[index].assertion_class, "override", False
            out.append(Assertion(index=index, text=text, line=doc.line(*pointer, index - 1),
                                 assertion_class=cls, class_rule=rule, hooks=hooks, shape_only=shape_only))
        return out

    def check_owner(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str, key: str) -> None:
        owner = doc.data.get(key) if isinstance(doc.data, dict) else None
        if isinstance(owner, str) and owner != skill.name:
            self.findings.append(error(
                "skill-field-mismatch", shown, doc.line(key),
                f"`{key}` is {owner!r} but the file lives in {skill.name}/; cases are keyed by folder, so "
                "set it to the folder name"))

    def load_evals_file(self, path: Path, skill: Skill) -> None:
        doc, problems = _read_json(path, self.policy)
        self.findings.extend(problems)
        if doc is None:
            return
        shown = self.show(path)
        data = doc.data
        if isinstance(data, dict) and "cases" in data:
            self._load_aegis_evals(doc, skill, shown)
        elif isinstance(data, dict) and "evals" in data:
            self._load_skill_creator_evals(doc, skill, shown)
        else:
            self.findings.append(error(
                "eval-format-unknown", shown, 1,
                "evals.json is neither the Aegis shape (an object with `cases`) nor the skill-creator shape "
                "(an object with `evals`); no case in it is run"))

    def _load_aegis_evals(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str) -> None:
        problems, paths = schemas.check(doc, schemas.AEGIS_EVALS, shown, "eval-schema")
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
                "make them agree (the runner will not guess which one is meant)"))
            case.kind, case.kind_rule = "invalid", "type-triggers-conflict"

    def _load_skill_creator_evals(self, doc: jsonfile.JsonDocument, skill: Skill, shown: str) -> None:
        problems, paths = schemas.check(doc, schemas.SKILL_CREATOR_EVALS, shown, "eval-schema")
        self.findings.extend(problems)
        self.check_owner(doc, skill, shown, "skill_name")
        seen: dict[str, int] = {}
        for index, raw in enumerate(doc.data["evals"] if isinstance(doc.data["evals"], list) else []):
            raw_id = raw.get("id") if isinstance(raw, dict) else None
            if isinstance(raw_id, bool) or not isinstance(raw_id, (int, str)) or raw_id == "":
                continue
            case_id = str(raw_id)
            uid = self.uid(skill, "evals", case_id)
            key = "expectations" if "expectations" in raw else "assertions"
            errors = _case_errors(paths, "evals", index)
            case = Case(
                uid=uid, skill=skill.name, source="evals", id=case_id, file=shown, line=doc.line("evals", index),
                format="skill-creator", prompt=_text(raw.get("prompt")) or "", triggers=True, target=skill.name,
                files=_strings(raw.get("files")), expected_output=_text(raw.get("expected_output")),
                assertions=self.assertions(raw.get(key), doc, ["evals", index, key], skill, uid),
                kind="invalid" if errors else "trigger",
                kind_rule="schema-invalid" if errors else "format:skill-creator",
            )
            self.keep(case, skill, seen)

    def read_checked(self, path: Path, schema_name: str, rule: str, policy: ReadPolicy | None = None
                     ) -> tuple[jsonfile.JsonDocument, set[tuple[Any, ...]], str] | None:
        """Read a JSON file and check it against its schema; None when it cannot be parsed."""
        policy = policy or self.policy
        doc, problems = _read_json(path, policy)
        self.findings.extend(problems)
        if doc is None:
            return None
        shown = policy.show(path)
        problems, paths = schemas.check(doc, schema_name, shown, rule)
        self.findings.extend(problems)
        return doc, paths, shown

    def load_trigger_file(self, path: Path, skill: Skill) -> None:
        checked = self.read_checked(path, schemas.AEGIS_TRIGGER, "eval-schema")
        if checked is None:
            return
        doc, paths, shown = checked
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
                target=_text(raw.get("expected_skill")) or "", should_not_trigger=_strings(raw.get("should_not_trigger")),
                reason=_text(raw.get("reason")), note=_text(raw.get("note")),
                kind="invalid" if errors else "discrimination",
                kind_rule="schema-invalid" if errors else "source:trigger-evals",
                lines=self.ref_lines(doc, index, raw),
            )
            self.keep(case, skill, seen)

    @staticmethod
    def ref_lines(doc: jsonfile.JsonDocument, index: int, raw: dict) -> dict[str, int]:
        lines = {"expected_skill": doc.line("cases", index, "expected_skill")}
        for position, _ in enumerate(_strings(raw.get("should_not_trigger"))):
            lines[f"should_not_trigger/{position}"] = doc.line("cases", index, "should_not_trigger", position)
        return lines

    # -- probes --
    def load_probe(self, probe_dir: Path, skill: Skill) -> None:
        probe_file, question_file = probe_dir / "probe.json", probe_dir / "question.md"
        if not probe_file.exists():
            self.findings.append(error("probe-missing-file", self.show(probe_file), 1,
                                       f"probe folder {probe_dir.name}/ has no probe.json"))
            return
        checked = self.read_checked(probe_file, schemas.PROBE, "probe-schema")
        question, problem = read_text(question_file, self.policy) if (
            question_file.exists() or question_file.is_symlink()) else (None, error(
                "probe-missing-file", self.show(question_file), 1,
                f"probe folder {probe_dir.name}/ has no question.md (the work artifact)"))
        if problem:
            self.findings.append(problem)
        if checked is None:
            return
        doc, paths, shown = checked
        data = doc.data
        if question is None or not isinstance(data, dict) or paths:
            return  # the probe cannot be built; the findings above say why
        digest = hashlib.sha256(probe_file.read_bytes() + b"\0" + question.encode()).hexdigest()
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
            checked = self.read_checked(path, schemas.SKILL_CREATOR_TRIGGER_SET, "eval-schema", policy)
            if checked is None:
                continue
            doc, paths, shown = checked
            skill.eval_files.append(shown)
            seen: dict[str, int] = {}
            for index, raw in enumerate(doc.data if isinstance(doc.data, list) else []):
                if not isinstance(raw, dict):
                    continue
                wanted = raw.get("should_trigger")
                invalid = bool(_case_errors_top(paths, index)) or not isinstance(wanted, bool)
                kind = "invalid" if invalid else ("trigger" if wanted else "no_trigger")
                case = Case(
                    uid=self.uid(skill, "trigger", f"q{index + 1}"), skill=skill.name, source="trigger",
                    id=f"q{index + 1}", file=shown, line=doc.line(index), format="skill-creator",
                    prompt=_text(raw.get("query")) or "", triggers=wanted if isinstance(wanted, bool) else None,
                    target=skill.name, kind=kind,
                    kind_rule="schema-invalid" if invalid else "format:skill-creator-trigger-set",
                )
                self.keep(case, skill, seen)

    # -- agents --
    def load_agents(self) -> dict[str, Agent]:
        agents: dict[str, Agent] = {}
        if not self.agents_dir or not self.agents_dir.is_dir():
            return agents
        for path in sorted(self.agents_dir.glob("*.md")):
            if path.is_symlink() and not self.policy.inside(path):
                continue
            agents[path.stem] = Agent(name=path.stem, file=self.show(path))
        return agents

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
            case.kind, case.kind_rule = override.kind, "override"
        known = {case.uid for case in self.cases}
        for override in self.settings.assertion_override:
            if override.uid not in known:
                self.findings.append(error("override-unknown-case", self.settings_shown, 1,
                                           f"assertion_override names {override.uid!r}, which is not a case of "
                                           "this library"))


def load_library(path: Path, settings: Settings, settings_file: Path | None = None) -> tuple[Library, list[Finding]]:
    """Read the library at `path` (a repository root or a skills folder). Raises LibraryError only
    when there is no library there at all; everything else is a finding."""
    root, named = find_root(path)
    skills_dir = find_skills_dir(root, named, settings)
    agents_dir = (root / settings.library.agents).resolve() if settings.library.agents else skills_dir.parent / "agents"
    settings_shown = display_path(settings_file, root) if settings_file else SETTINGS_FILE
    loader = _Loader(root, skills_dir, agents_dir if agents_dir.is_dir() else None, settings, settings_shown)
    loader.findings.extend(scan_tree(skills_dir, loader.policy))
    if loader.agents_dir:
        loader.findings.extend(scan_tree(loader.agents_dir, loader.policy))
    skills = {folder.name: loader.load_skill(folder) for folder in loader.skill_folders()}
    agents = loader.load_agents()
    loader.load_trigger_sets(skills)
    for case in loader.cases:
        case.workspace_signals = classify.workspace_signals(case.prompt, loader.rules) if case.source != "probe" else []
    loader.apply_case_overrides()
    folders = [skills_dir] + ([loader.agents_dir] if loader.agents_dir else [])
    library = Library(
        root=str(root), skills_dir=loader.show(skills_dir), agents_dir=loader.show(loader.agents_dir)
        if loader.agents_dir else None, settings_file=str(settings_file) if settings_file else None,
        content_hash=_content_hash(folders, loader.policy), skills=skills, agents=agents, cases=loader.cases,
        template_cases=loader.template_cases, probes=loader.probes,
    )
    return library, loader.findings


def is_subagent(name: str) -> bool:
    return name.endswith(SUBAGENT_SUFFIX)


def subagent_name(name: str) -> str:
    return name[: -len(SUBAGENT_SUFFIX)].strip()


_SAFE_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def is_kebab(name: str) -> bool:
    return bool(_SAFE_NAME.match(name))
