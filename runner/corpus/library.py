"""The corpus model: a library's skills, subagents, eval cases and probes, as typed models.

runner.corpus.loader reads a library into these (`load_library`); every later stage reads only these. Case kinds
and assertion classes are settled when the library is read (runner.corpus.classify), so every stage sees one
settled corpus.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from runner.core.kinds import LoadedKind
from runner.corpus import slash
from runner.corpus.classify import SUBAGENT_SUFFIX
from runner.corpus.files import relative_shown
from runner.corpus.layout import (
    Layout,
    LibraryError,  # noqa: F401 - re-exported: the error for a path that holds no library
)

# `file`: an eval file of which no case could be read (FILE_UNREADABLE): one entry stands for all its cases.
Source = Literal["evals", "trigger", "probe", "scenario", "routing", "file"]
CaseFormat = Literal["aegis", "skill-creator", "trigger-set", "scenario", "routing", "skill-checks", "probe", "file"]
# The kind_rule of that entry, and of a probe folder whose probe.json or question.md cannot be read (PROBE_UNREADABLE).
# Seed 002: UNRUN is the default state of every case, so a case that cannot be read is still shown, never dropped.
FILE_UNREADABLE = "file-unreadable"
PROBE_UNREADABLE = "probe-unreadable"
# A routing case that expects no skill of the library to take its prompt: it belongs to the library, not to a
# skill, and its target is any skill (it passes when none of the library's skills fires).
LIBRARY_OWNER = "(library)"
ANY_SKILL = "(any skill)"
class Assertion(BaseModel):
    index: int = Field(ge=1)
    text: str
    line: int
    assertion_class: str
    class_rule: str
    hooks: list[str] = []
    shape_only: bool = Field(default=False, description="Artifact shape and nothing more: the script decides it.")


# How the order of the skills that must fire counts (waza's `mode`): any order; the must skills first fired in the
# order written (others may fire between them when `allow_extra` allows); exactly the must skills, in that order,
# and no other library skill.
RoutingOrder = Literal["any_order", "in_order", "exact"]


class RoutingSpec(BaseModel):
    """A case's routing assertions, read from the shapes authors write (skill-up's `must_include` /
    `must_not_include` / `allow_extra` / `max_skills`, waza's `required_skills` / `forbidden_skills` / `mode`) and
    checked by the harness from what fired in the whole session (runner.execute.grading.routing_parts). Only the
    library's skills count towards `max_skills` and `allow_extra`: the host's own skills and every subagent are not
    the library's skills (as for a routing case that expects none). A subagent named in `must_fire` or
    `must_not_fire` (`<agent> (subagent)`) counts like a skill there."""

    must_fire: list[str] = Field(default=[], description="Every one of these must fire (in any turn).")
    must_not_fire: list[str] = Field(default=[], description="None of these may fire.")
    max_skills: int | None = Field(default=None, ge=1, description="At most this many of the library's skills "
                                                                    "fire; None: no bound.")
    allow_extra: bool = Field(default=True, description="Whether library skills outside `must_fire` may fire too.")
    order: RoutingOrder = Field(default="any_order", description="any_order | in_order (the must skills first fire "
                                                                 "in the order written) | exact (the library skills "
                                                                 "that fire are the must skills, in that order, and "
                                                                 "nothing else)")

    def names(self) -> list[str]:
        """Every skill the spec names, in order written, without repeats."""
        return list(dict.fromkeys([*self.must_fire, *self.must_not_fire]))


class Case(BaseModel):
    uid: str
    skill: str = Field(description="The skill folder whose eval file holds the case.")
    source: Source
    id: str
    file: str
    line: int
    format: CaseFormat
    prompt: str
    case_type: str | None = None
    triggers: bool | None = None
    target: str = Field(description="The skill (or `<agent> (subagent)`) whose activation the case measures.")
    should_not_trigger: list[str] = []
    reason: str | None = None
    note: str | None = None
    files: list[str] = []
    files_dir: str | None = Field(default=None, description="The folder `files` are relative to (the skill's), "
                                                            "absolute.")
    expected_output: str | None = None
    assertions: list[Assertion] = []
    kind: LoadedKind = Field(description="trigger | refusal | no_trigger | discrimination | routing | probe | unknown "
                                         "| invalid")
    kind_rule: str
    label: str | None = Field(default=None, description="A category tag the file gives the case in `type` / `kind` "
                                                        "(`security`, `benchmark`): shown, never a kind.")
    routing: RoutingSpec | None = Field(default=None, description="The case's routing assertions (kind `routing`).")
    workspace_signals: list[str] = []
    lines: dict[str, int] = Field(default_factory=dict,
                                  description="Line of fields that findings point at, e.g. `should_not_trigger/1`.")
    activation_part_only: bool = Field(
        default=False, description="A copy of the case made for a routing sweep (`route`, runner.plan.sweep): only "
                                   "its activation part is measured, whatever its kind, and the assertions that "
                                   "read the answer were left out of it (plan.json `routing_sweep`).")

    @property
    def judged(self) -> bool:
        """Whether a judge reads this case's attempts: it has a prose (semantic) assertion."""
        return any(a.assertion_class == "semantic" for a in self.assertions)


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
    name: str = Field(description="The folder name, the skill's canonical name (the name the host lists it under).")
    dir: str = Field(description="The skill's folder as shown (relative to the repository root).")
    path: str = Field(default="", description="The skill's folder, absolute.")
    root: str = Field(default="", description="The root folder it was found under (layout), as shown.")
    plugin: str | None = None
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

    @property
    def folder_name(self) -> str:
        """The name without its plugin namespace (`seo` of `web-kit:seo`): what the frontmatter and the eval
        files of the skill call it."""
        return self.name.split(":", 1)[1] if self.plugin and self.name.startswith(f"{self.plugin}:") else self.name


class UnreadFile(BaseModel):
    """An eval-looking file the runner found and did not read, and why (validate says it too, as a finding)."""

    file: str = Field(description="As shown (relative to the repository root).")
    reason: str


class Agent(BaseModel):
    name: str
    file: str


class Library(BaseModel):
    root: str
    skills_dir: str = Field(description="The first folder skills were read from, as shown (see `layout`).")
    agents_dir: str | None
    layout: Layout | None = None
    settings_file: str | None
    content_hash: str
    skills: dict[str, Skill]
    agents: dict[str, Agent]
    cases: list[Case]
    template_cases: list[Case] = []
    probes: list[Probe] = []
    unread: list[UnreadFile] = Field(default=[], description="Eval-looking files found and not read, with why.")

    def unreadable_files(self) -> list[Case]:
        """The entries that stand for an eval file of which no case could be read (FILE_UNREADABLE): a run shows
        each as UNRUN, while counts of cases leave them out (how many cases such a file holds is not known)."""
        return [case for case in self.cases if case.source == "file"]

    def read_cases(self) -> list[Case]:
        """The cases read from the eval files: every case but those entries."""
        return [case for case in self.cases if case.source != "file"]

    def read_from(self) -> str:
        """Every root skills were read from, as a header shows them (not only the first of several)."""
        return ", ".join(self.layout.roots) if self.layout and self.layout.roots else self.skills_dir

    def skill_paths(self) -> dict[str, Path]:
        """Skill name -> its folder: what a session receives as `.claude/skills/<name>/`."""
        return {name: Path(skill.path) for name, skill in self.skills.items()}

    def agent_paths(self) -> dict[str, Path]:
        return {name: Path(self.root) / agent.file for name, agent in self.agents.items()}

    def aliases(self) -> dict[str, str]:
        return aliases_of(self.skills)

    def slash_names(self) -> dict[str, str]:
        return slash_names_of(self.skills)

    def invoked_by_hand(self, case: Case, name: str | None = None) -> bool:
        """Whether the case's prompt invokes its own target (or `name`) as a slash command (runner.corpus.slash): the
        host expands it, so the skill fires without the model picking it."""
        wanted = name or case.target
        return case.prompt.startswith("/") and slash.invoked_skill(case.prompt, self.slash_names()) == wanted

    def names(self) -> dict[str, str]:
        """Every name the library answers to -> the name cases and reports use: skill folders, their
        aliases, and `<agent> (subagent)`. The classifier and the verdict both read names from this."""
        return names_of(self.skills, self.agents)

    def hidden_files(self) -> dict[str, frozenset[str]]:
        """Per skill, what a session never receives (relative to the skill folder): its evals/ folder and
        every eval file read from the folder. They are the answer key."""
        out: dict[str, frozenset[str]] = {}
        unreadable = [(c.skill, c.file) for c in self.unreadable_files()]
        for name, skill in self.skills.items():
            files = [*skill.eval_files, *(file for owner, file in unreadable if owner == name)]
            inside = {rel for rel in (relative_shown(f, skill.dir) for f in files) if rel}
            out[name] = frozenset({"evals", "evaluations"} | inside)
        return out


def aliases_of(skills: dict[str, Skill]) -> dict[str, str]:
    """Other names the host accepts for a skill: a frontmatter `name` that differs from the folder (the
    host lists `folder (name)` and a Skill call may use either). A name two skills claim is no alias."""
    claimed: dict[str, list[str]] = {}
    for skill in skills.values():
        name = skill.fields.get("name")
        if isinstance(name, str) and name and name != skill.name and name not in skills:
            claimed.setdefault(name, []).append(skill.name)
    return {alias: owners[0] for alias, owners in claimed.items() if len(owners) == 1} | namespaced_of(skills)


def namespaced_of(skills: dict[str, Skill]) -> dict[str, str]:
    """`plugin:skill` names, each mapped to itself: a Skill call naming one names that skill, not its bare name
    (runner.hosts.activation.skill_name looks a call's whole name up here first)."""
    return {name: name for name, skill in skills.items() if skill.folder_name != name}


def slash_names_of(skills: dict[str, Skill]) -> dict[str, str]:
    """Every name a slash command may use to invoke a skill -> its folder name: folder names and aliases, as the CLI
    resolves them (measured), without the skills a user may not invoke (`user-invocable: false`: the CLI refuses
    the command, nothing fires)."""
    names = {**{name: name for name in skills}, **aliases_of(skills)}
    return {name: folder for name, folder in names.items() if skills[folder].fields.get("user-invocable") is not False}


def names_of(skills: dict[str, Skill], agents: dict[str, Agent]) -> dict[str, str]:
    out = {name: name for name in skills}
    out.update(aliases_of(skills))
    out.update({f"{name}{SUBAGENT_SUFFIX}": f"{name}{SUBAGENT_SUFFIX}" for name in agents})
    return out


def is_subagent(name: str) -> bool:
    return name.endswith(SUBAGENT_SUFFIX)


def subagent_name(name: str) -> str:
    return name[: -len(SUBAGENT_SUFFIX)].strip()


_SAFE_NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


def is_kebab(name: str) -> bool:
    return bool(_SAFE_NAME.match(name))
