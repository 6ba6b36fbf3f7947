"""Which cases a run executes, and why each one was chosen.

`select_tier` picks by tier (semantics §7): `pr` (changed skills and their named neighbours), `cadence` (a stratified
rotating sample: S consecutive periods run every case once) or `full`; any tier can be narrowed by skill and
case-uid glob without changing a case's slot, and to its routing cases (`route`). Every chosen case carries its
reason. With an earlier run's routing matrix, the pr tier also follows its confusions: a skill whose description a
pull request changes brings the routing cases of the skills the matrix shows confused with it.

Design notes: docs/design/selection.md.
"""

from __future__ import annotations

import fnmatch
import hashlib
import math
import re
import subprocess
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, Field

from runner.core.errors import UsageError
from runner.core.kinds import traits_of
from runner.corpus import frontmatter
from runner.corpus.classify import SUBAGENT_SUFFIX
from runner.corpus.files import relative_shown
from runner.corpus.library import ANY_SKILL, Case, Library, is_subagent
from runner.corpus.settings import SelectSettings
from runner.plan import confusions as confusions_mod

DEFAULT_SETTINGS_PATHS = (".skill-evals.toml", ".skill-evals/")
GIT_TIMEOUT_S = 120
TIERS = ("pr", "cadence", "full")


class SelectError(UsageError):
    """The selection cannot be made (a usage error, exit 2): a bad ref, git failing, a bad period key."""


def neighbour_graph(library: Library) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = defaultdict(set)

    def link(a: str, b: str) -> None:
        if a != b and not is_subagent(a) and not is_subagent(b) and ANY_SKILL not in (a, b):
            graph[a].add(b)
            graph[b].add(a)

    for skill in library.skills.values():
        for name in skill.overlaps_with:
            link(skill.name, name)
    for case in library.cases:
        if case.source == "routing":
            for name in case.should_not_trigger:
                link(case.target, name)  # the routing file's own owner is the target; (any skill) is no skill
            continue
        if case.source != "trigger":
            continue
        for name in [case.target, *case.should_not_trigger]:
            link(case.skill, name)
        for name in case.should_not_trigger:
            link(case.target, name)
    return graph


def is_routing(case: Case) -> bool:
    """A case that names a skill that must fire or must stay silent: a row of the routing matrix, run by `route`
    (its kind's traits say so, runner.core.kinds)."""
    traits = traits_of(case.kind)
    return traits is not None and traits.routing


def select(library: Library, skills: list[str], case_patterns: list[str], with_neighbours: bool
           ) -> tuple[list[tuple[Case, str]], list[str]]:
    """(selected cases with the reason, names asked for that are not skills of the library)."""
    chosen, unknown = _narrow(library, skills, with_neighbours)
    out = []
    for case in library.cases:
        if chosen is not None and case.skill not in chosen:
            continue
        if case_patterns and not any(fnmatch.fnmatchcase(case.uid, p) for p in case_patterns):
            continue
        why = f"skill {case.skill} ({chosen[case.skill]})" if chosen is not None else "full tier: every case"
        if case_patterns:
            why += f"; uid matches {' or '.join(case_patterns)}"
        out.append((case, why))
    return out, unknown


# ---- what a pull request changed ----------------------------------------------------------------

def _check_ref(name: str, ref: str) -> None:
    if not ref or not ref.strip():
        raise SelectError(f"--{name} needs a git ref, got an empty string")
    if ref.startswith("-"):
        raise SelectError(f"--{name} {ref!r}: a git ref cannot start with '-'")


def git_changed_paths(root: Path, base: str, head: str) -> list[str]:
    """Paths (relative to `root`, posix) that differ between the merge base of base and head, and head.

    `--relative` keeps the paths relative to `root` (and only those under it) when the library is a
    sub-folder of the git work tree; `--no-renames` lists both sides of a move.
    """
    _check_ref("base", base)
    _check_ref("head", head)
    command = ["git", "--no-pager", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff", "--relative",
               f"{base}...{head}", "--"]
    try:
        done = subprocess.run(command, cwd=root, capture_output=True, timeout=GIT_TIMEOUT_S, check=False)
    except FileNotFoundError as exc:
        raise SelectError(f"the pr tier needs git, which was not found: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise SelectError(f"git diff {base}...{head} took more than {GIT_TIMEOUT_S} s") from exc
    if done.returncode != 0:
        message = done.stderr.decode("utf-8", "replace").strip() or f"exit status {done.returncode}"
        raise SelectError(f"git diff {base}...{head} failed in {root}: {message}")
    return sorted(p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p)


def repository_changes(root: Path, base: str, head: str) -> tuple[int, str] | None:
    """(paths changed in the whole repository between the merge base and head, the library root's folder inside
    the work tree, "" at its top), or None when git cannot say. git_changed_paths counts only the paths under
    the library's root: "0 changed paths" would hide the 10 changed elsewhere in the repository."""
    try:
        done = subprocess.run(["git", "--no-pager", "diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
                               f"{base}...{head}", "--"], cwd=root, capture_output=True, timeout=GIT_TIMEOUT_S,
                              check=False)
        where = subprocess.run(["git", "rev-parse", "--show-prefix"], cwd=root, capture_output=True, text=True,
                               timeout=GIT_TIMEOUT_S, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0 or where.returncode != 0:
        return None
    return len([p for p in done.stdout.split(b"\0") if p]), where.stdout.strip().rstrip("/")


def changed_paths_text(paths: list[str], repository: tuple[int, str] | None) -> str:
    """`N changed path(s)`, with the repository's own count when the library is a folder of a larger work tree:
    `10 changed path(s) in the repository, 0 of them in the library (examples/library)`."""
    if repository is None or not repository[1]:
        return f"{len(paths)} changed path(s)"
    total, folder = repository
    return f"{total} changed path(s) in the repository, {len(paths)} of them in the library ({folder})"


def _part_under(path: str, folder: str) -> tuple[str | None, bool]:
    """(`a`, whether the path is inside `a`) for `folder/a/...`; (`a`, False) for the file `folder/a`;
    (None, False) outside the folder."""
    parts = PurePosixPath(path).parts
    prefix = PurePosixPath(folder).parts if folder not in ("", ".") else ()
    if len(parts) <= len(prefix) or tuple(parts[: len(prefix)]) != prefix:
        return None, False
    return parts[len(prefix)], len(parts) > len(prefix) + 1


def _is_settings_path(path: str, settings_paths: tuple[str, ...] | list[str]) -> bool:
    for entry in settings_paths:
        if entry.endswith("/"):
            if path.startswith(entry) or path == entry.rstrip("/"):
                return True
        elif path == entry:
            return True
    return False


@dataclass
class Changes:
    paths: list[str]
    skills: set[str] = field(default_factory=set)
    """Folders directly under the skills folder that the diff touches (a file at its top level is not one)."""
    agents: set[str] = field(default_factory=set)
    settings: list[str] = field(default_factory=list)


def classify_paths(paths: list[str], skills_dir: Path | str | list[str], agents_dir: Path | str | list[str] | None,
                   settings_paths: tuple[str, ...] | list[str] = DEFAULT_SETTINGS_PATHS,
                   skill_dirs: dict[str, str] | None = None) -> Changes:
    """Which skills, subagents and settings the changed paths touch. `skills_dir` / `agents_dir`: the folders
    skills and subagents are read from (one or several, relative to the root). `skill_dirs`: each skill's own
    folder (relative to the root); a path inside one touches that skill, whatever the layout. A path under a
    skills folder that is in no known skill names the folder below it (a deleted or renamed skill)."""
    roots = [Path(r).as_posix() for r in ([skills_dir] if isinstance(skills_dir, (str, Path)) else skills_dir)]
    agents_roots = [] if agents_dir is None else [
        Path(a).as_posix() for a in ([agents_dir] if isinstance(agents_dir, (str, Path)) else agents_dir)]
    # The deepest folder first: a skill folder inside another's (a single-skill repository) decides.
    owned = sorted((skill_dirs or {}).items(), key=lambda item: -len(item[1]))
    changes = Changes(paths=list(paths))
    for path in paths:
        if _is_settings_path(path, settings_paths):
            changes.settings.append(path)
        owner = next((name for name, folder in owned if relative_shown(path, folder)), None)
        if owner is not None:
            changes.skills.add(owner)
        else:
            for root in roots:
                name, inside = _part_under(path, root)
                if name is not None and inside:
                    changes.skills.add(name)
                    break
        for agents_root in agents_roots:
            agent, inside = _part_under(path, agents_root)
            if agent is not None and not inside and agent.endswith(".md"):
                changes.agents.add(agent[: -len(".md")])
    return changes


def _skill_dirs(library: Library) -> dict[str, str]:
    return {name: skill.dir for name, skill in library.skills.items()}


def agent_users(library: Library) -> dict[str, set[str]]:
    """Subagent name -> the skills that name `<agent> (subagent)` (overlaps_with, or their cases' target or
    should_not_trigger)."""
    users: dict[str, set[str]] = defaultdict(set)
    for skill in library.skills.values():
        for name in skill.overlaps_with:
            if is_subagent(name):
                users[name[: -len(SUBAGENT_SUFFIX)].strip()].add(skill.name)
    for case in library.cases:
        for name in [case.target, *case.should_not_trigger]:
            if is_subagent(name):
                users[name[: -len(SUBAGENT_SUFFIX)].strip()].add(case.skill)
    return users


def changed_skills(root: Path, skills_dir: Path, base: str, head: str, *, agents_dir: Path | None = None,
                   library: Library | None = None,
                   settings_paths: tuple[str, ...] | list[str] = DEFAULT_SETTINGS_PATHS
                   ) -> tuple[set[str], bool, list[str]]:
    """(skill folders touched between base...head, whether the runner's settings changed, the changed paths).

    `skills_dir` and `agents_dir` are relative to `root` (as `Library.skills_dir` is); `agents_dir`
    defaults to `agents` beside the skills folder. With `library`, a changed `<agents_dir>/<agent>.md`
    also touches every skill that names `<agent> (subagent)`.
    """
    agents = agents_dir if agents_dir is not None else Path(skills_dir).parent / "agents"
    changes = classify_paths(git_changed_paths(root, base, head), skills_dir, agents, settings_paths,
                             _skill_dirs(library) if library is not None else None)
    touched = set(changes.skills)
    if library is not None:
        users = agent_users(library)
        for agent in changes.agents:
            touched |= users.get(agent, set())
    return touched, bool(changes.settings), changes.paths


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "--no-pager", *args], cwd=root, capture_output=True, timeout=GIT_TIMEOUT_S,
                              check=False)
    except FileNotFoundError as exc:
        raise SelectError(f"the pr tier needs git, which was not found: {exc}") from exc
    except subprocess.TimeoutExpired as exc:
        raise SelectError(f"git {' '.join(args)} took more than {GIT_TIMEOUT_S} s") from exc


def _description_at(root: Path, rev: str, path: str) -> tuple[bool, object]:
    """(whether `rev` holds the file, its frontmatter's description as YAML reads it, None when it has none or the
    frontmatter cannot be read: the host then lists no description either)."""
    done = _git(root, "show", f"{rev}:./{path}")
    if done.returncode != 0:
        return False, None
    found, _ = frontmatter.parse(done.stdout.decode("utf-8", "replace"), path)
    return True, found.fields.get("description") if found is not None else None


def description_changes(root: Path, base: str, head: str, library: Library, names: Sequence[str]) -> dict[str, str]:
    """Skill -> how its SKILL.md description changed between the merge base of base and head, and head (`changed`,
    or `added` with a skill the base did not have), for the named skills; a skill whose description is the same is
    left out. The same span as git_changed_paths: the pull request's own change."""
    merged = _git(root, "merge-base", base, head)
    if merged.returncode != 0:
        message = merged.stderr.decode("utf-8", "replace").strip() or f"exit status {merged.returncode}"
        raise SelectError(f"git merge-base {base} {head} failed in {root}: {message}")
    fork = merged.stdout.decode("ascii", "replace").strip()
    out: dict[str, str] = {}
    for name in sorted(names):
        skill_md = library.skills[name].skill_md
        had, before = _description_at(root, fork, skill_md)
        has, after = _description_at(root, head, skill_md)
        if has and not had:
            out[name] = "added"
        elif has and before != after:
            out[name] = "changed"
    return out


@dataclass
class Followed:
    """What the pr tier added by following an earlier run's confusions: skill -> why, case uid -> why."""

    skills: dict[str, str] = field(default_factory=dict)
    cases: dict[str, str] = field(default_factory=dict)
    note: str = ""

    def why(self, case: Case) -> str | None:
        """Why the case is selected through a confusion: it is one of the confusion's own cases, or a routing case
        of (or aimed at) a skill confused with a changed description."""
        if case.uid in self.cases:
            return f"routing case of {case.skill}: {self.cases[case.uid]}"
        if not is_routing(case):
            return None
        if case.skill in self.skills:
            return f"routing case of {case.skill}: {self.skills[case.skill]}"
        if case.target in self.skills:
            return f"routing case aimed at {case.target}: {self.skills[case.target]}"
        return None


def follow_confusions(library: Library, recorded: confusions_mod.Recorded, described: dict[str, str], span: str,
                      selected: Sequence[str]) -> Followed:
    """The skills (other than `selected`, the changed ones) that the earlier run saw confused with a skill whose
    description changed, in both directions, and each confusion's own cases; each with the confusion in words."""
    followed = Followed()
    reasons: dict[str, list[str]] = defaultdict(list)
    for name, how in sorted(described.items()):
        change = f"{name}'s description {how} in {span}"
        for other, tied in sorted(confusions_mod.partners(recorded.confusions, name).items()):
            said = "; ".join(c.said() for c in tied)
            if other in library.skills and other not in selected:
                reasons[other].append(f"{said} in {recorded.source}, and {change}")
            for confusion in tied:
                for uid in confusion.cases:
                    followed.cases.setdefault(uid, f"a case of the confusion {confusion.said()} in {recorded.source}, "
                                                   f"and {change}")
        for confusion in confusions_mod.from_no_skill(recorded.confusions, name):
            for uid in confusion.cases:
                followed.cases.setdefault(uid, f"a case of the confusion {confusion.said()} in {recorded.source}, "
                                               f"and {change}")
    followed.skills = {name: "confused with a changed description: " + "; ".join(why)
                       for name, why in reasons.items()}
    return followed


def _confusion_note(recorded: confusions_mod.Recorded, described: dict[str, str], followed: Followed) -> str:
    parts = [f"confusions followed from {recorded.source}: "
             + (f"description(s) changed: {', '.join(f'{n} ({how})' for n, how in described.items())}; "
                if described else "no skill's description changed, so none is followed")
             + (f"{len(followed.skills)} skill(s) confused with them added "
                f"({', '.join(sorted(followed.skills)) or 'none'})" if described else "")]
    if recorded.note:
        parts.append(recorded.note)
    return "; ".join(parts)


# ---- cadence --------------------------------------------------------------------------------------

def stable_hash(text: str) -> int:
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big")


def cadence_slots(fraction: float) -> int:
    """S = ceil(1/fraction): the effective fraction is 1/S, so that a cycle is a whole number of periods."""
    if not 0 < fraction <= 1:
        raise SelectError(f"cadence fraction must be in (0, 1], got {fraction}")
    return max(1, math.ceil(round(1 / fraction, 9)))


def current_period(today: date | None = None) -> str:
    """The ISO week of today (UTC), e.g. `2026-W48`."""
    day = today or datetime.now(timezone.utc).date()
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


def period_index(key: str) -> tuple[int, bool]:
    """(an integer that grows by one from one period to the next, whether the key's form guarantees that)."""
    key = key.strip()
    try:
        if match := _WEEK.match(key):
            return date.fromisocalendar(int(match.group(1)), int(match.group(2)), 1).toordinal() // 7, True
        if _DAY.match(key):
            return date.fromisoformat(key).toordinal(), True
        if match := _MONTH.match(key):
            month = int(match.group(2))
            if not 1 <= month <= 12:
                raise ValueError(f"month {month}")
            return int(match.group(1)) * 12 + month - 1, True
    except ValueError as exc:
        raise SelectError(f"period {key!r} looks like a week, date or month but is not one: {exc}") from exc
    if key.isdigit():
        return int(key), True
    if not key:
        raise SelectError("the period key is empty")
    return stable_hash(key), False


def cadence_slot_of(library: Library, slots: int) -> dict[str, int]:
    """uid -> slot (0-based). Per skill: order by stable hash of uid, deal into slots from a per-skill offset."""
    by_skill: dict[str, list[Case]] = defaultdict(list)
    for case in library.cases:
        by_skill[case.skill].append(case)
    out: dict[str, int] = {}
    for skill, cases in by_skill.items():
        offset = stable_hash(skill) % slots
        for position, case in enumerate(sorted(cases, key=lambda c: (stable_hash(c.uid), c.uid))):
            out[case.uid] = (position + offset) % slots
    return out


# ---- the selection --------------------------------------------------------------------------------

class SelectedCase(BaseModel):
    uid: str
    skill: str
    why: str


class Selection(BaseModel):
    tier: str = Field(description="pr | cadence | full (repeats and quorum come from [tiers.<tier>]).")
    base: str | None = None
    head: str | None = None
    period: str | None = Field(default=None, description="cadence: the period key that picked the slot.")
    slot: int | None = Field(default=None, description="cadence: the slot picked (1-based).")
    slots: int | None = Field(default=None, description="cadence: slots in a cycle (a cycle is this many periods).")
    cases: list[SelectedCase]
    changed_skills: list[str] = Field(default=[], description="pr: skills changed between base...head (including "
                                                               "skills that name a changed subagent).")
    changed_agents: list[str] = []
    described: dict[str, str] = Field(default={}, description="pr with --previous: changed skills whose SKILL.md "
                                                              "description changed, and how (changed, added).")
    confused: dict[str, str] = Field(default={}, description="pr with --previous: skills added because the earlier "
                                                             "run's routing matrix shows them confused with a changed "
                                                             "description, and why.")
    previous: str | None = Field(default=None, description="pr: the earlier run's results.json whose confusions "
                                                           "were followed.")
    routing: bool = Field(default=False, description="Only routing cases (`route`): cases that name a skill that "
                                                     "must fire or stay silent.")
    settings_changed: bool = False
    changed_paths: list[str] = []
    unknown_skills: list[str] = Field(default=[], description="--skill names that are not skills of the library.")
    capped: bool = False
    note: str = ""


def _narrow(library: Library, skills: list[str], with_neighbours: bool) -> tuple[dict[str, str] | None, list[str]]:
    """Skill -> how it is in the narrowing (None = no narrowing by skill), and unknown names."""
    if not skills:
        return None, []
    unknown = [name for name in skills if name not in library.skills]
    keep = {name: "named" for name in skills if name in library.skills}
    if with_neighbours:
        graph = neighbour_graph(library)
        for name in list(keep):
            for neighbour in sorted(graph.get(name, ())):
                if neighbour in library.skills:
                    keep.setdefault(neighbour, f"neighbour of {name}")
    return keep, unknown


def _cap(chosen: list[tuple[Case, str]], priority: dict[str, int], cap: int) -> list[tuple[Case, str]]:
    """Keep `cap` cases: priority 0 then 1 first, then a round-robin over the skills; library order kept."""
    if len(chosen) <= cap:
        return chosen
    first = [item for item in chosen if priority.get(item[0].skill, 2) < 2]
    first.sort(key=lambda item: priority[item[0].skill])
    rest_by_skill: dict[str, list[tuple[Case, str]]] = defaultdict(list)
    for item in chosen:
        if priority.get(item[0].skill, 2) == 2:
            rest_by_skill[item[0].skill].append(item)
    ordered = list(first)
    queues = list(rest_by_skill.values())
    depth = 0
    while len(ordered) < cap and any(depth < len(q) for q in queues):
        ordered.extend(q[depth] for q in queues if depth < len(q))
        depth += 1
    kept = {id(item[0]) for item in ordered[:cap]}
    return [item for item in chosen if id(item[0]) in kept]


def select_configured(library: Library, chosen: SelectSettings, tier: str, *, base: str | None, head: str | None,
                      period: str | None, skills: Sequence[str], cases: Sequence[str],
                      neighbours: bool, previous: Path | None = None, routing: bool = False) -> Selection:
    """The cases a tier selects with the settings' [select] knobs: the one place `select`, `plan`, `run`, `route`
    and `run --container` build a selection, so they choose the same cases. Raises SelectError on a usage problem."""
    return select_tier(library, tier, base=base, head=head, period=period or chosen.period or None,
                       fraction=chosen.cadence_fraction, skills=list(skills), case_patterns=list(cases),
                       with_neighbours=neighbours, max_full_cases=chosen.max_full_cases,
                       settings_paths=chosen.settings_paths, previous=previous, routing=routing)


def select_tier(library: Library, tier: str, *, base: str | None = None, head: str | None = None,
                period: str | None = None, fraction: float = 0.25, skills: list[str] | tuple[str, ...] = (),
                case_patterns: list[str] | tuple[str, ...] = (), with_neighbours: bool = False,
                max_full_cases: int = 2000,
                settings_paths: tuple[str, ...] | list[str] = DEFAULT_SETTINGS_PATHS, previous: Path | None = None,
                routing: bool = False) -> Selection:
    """The cases of a tier, each with why it was chosen. `previous`: an earlier run (its folder or results.json)
    whose routing matrix the pr tier follows; `routing`: keep only the routing cases (`route`). Raises SelectError
    (a ConfusionsError for an unreadable `previous`) on a usage problem."""
    if tier not in TIERS:
        raise SelectError(f"unknown tier {tier!r} (pr, cadence or full)")
    skills, case_patterns = list(skills), list(case_patterns)
    keep, unknown = _narrow(library, skills, with_neighbours)
    notes: list[str] = []
    selection = Selection(tier=tier, cases=[], unknown_skills=unknown, routing=routing)
    if previous is not None and tier != "pr":
        notes.append("--previous only applies to --tier pr; ignored")
    chosen: list[tuple[Case, str]] = []
    priority: dict[str, int] = {}

    if tier == "full":  # exactly what `select` has always done, with --skill/--neighbours/--case
        picked, unknown = select(library, skills, case_patterns, with_neighbours)
        notes.append(f"full: every case ({len(library.cases)})" + (
            f", narrowed to {len(picked)}" if skills or case_patterns else ""))
        if base or head:
            notes.append("--base/--head only apply to --tier pr; ignored")
        if routing:
            picked = _routing_only(picked, notes)
        cases = [SelectedCase(uid=case.uid, skill=case.skill, why=why) for case, why in picked]
        return selection.model_copy(update={"cases": cases, "note": "; ".join(notes)})
    if tier == "cadence":
        key = period.strip() if period and period.strip() else current_period()
        index, rotates = period_index(key)
        slots = cadence_slots(fraction)
        slot = index % slots
        slot_of = cadence_slot_of(library, slots)
        per_skill: dict[str, int] = defaultdict(int)
        total: dict[str, int] = defaultdict(int)
        for case in library.cases:
            total[case.skill] += 1
            per_skill[case.skill] += slot_of[case.uid] == slot
        for case in library.cases:
            if slot_of[case.uid] == slot:
                chosen.append((case, f"cadence slot {slot + 1}/{slots} for period {key} (skill {case.skill}: "
                                     f"{per_skill[case.skill]} of its {total[case.skill]} case(s) this period)"))
        selection = selection.model_copy(update={"period": key, "slot": slot + 1, "slots": slots})
        notes.append(f"cadence: slot {slot + 1} of {slots} for period {key} (fraction {fraction} → 1/{slots}); "
                     f"stratified by skill; every case runs once per {slots} consecutive periods")
        if not rotates:
            notes.append(f"period {key!r} is not an ISO week, date, month or number: its slot is hashed, so "
                         "consecutive keys are not guaranteed to cover every case once per cycle")
        if base or head:
            notes.append("--base/--head only apply to --tier pr; ignored")
    else:
        if not base:
            raise SelectError("--tier pr needs --base REF (the pull request's base, e.g. origin/main)")
        head = head or "HEAD"
        span = f"{base}...{head}"
        layout = library.layout
        roots = layout.roots if layout is not None else [library.skills_dir]
        agents = layout.agents_dirs if layout is not None and layout.agents_dirs else [
            library.agents_dir or (Path(library.skills_dir).parent / "agents").as_posix()]
        changes = classify_paths(git_changed_paths(Path(library.root), base, head), roots, agents, settings_paths,
                                 _skill_dirs(library))
        why_skill: dict[str, str] = {}
        for name in sorted(changes.skills):
            if name in library.skills:
                why_skill[name] = f"changed in {span}"
        users = agent_users(library)
        for agent in sorted(changes.agents):
            for name in sorted(users.get(agent, ())):
                if name in library.skills:
                    why_skill.setdefault(name, f"names {agent}{SUBAGENT_SUFFIX}, changed in {span}")
        gone = sorted(name for name in changes.skills if name not in library.skills)
        if gone:
            notes.append(f"changed skill folder(s) not in the library as checked out (deleted or not skills): "
                         f"{', '.join(gone)}")
        graph = neighbour_graph(library)
        neighbour_of: dict[str, list[str]] = defaultdict(list)
        for name in sorted(why_skill):
            for neighbour in sorted(graph.get(name, ())):
                if neighbour in library.skills and neighbour not in why_skill:
                    neighbour_of[neighbour].append(name)
        why_neighbour = {name: f"neighbour of {', '.join(of)} (changed in {span})"
                         for name, of in neighbour_of.items()}
        followed, described, followed_note = Followed(), {}, ""
        if previous is not None:
            recorded = confusions_mod.read(previous)
            described = description_changes(Path(library.root), base, head, library, sorted(why_skill))
            followed = follow_confusions(library, recorded, described, span, sorted(why_skill))
            followed_note = _confusion_note(recorded, described, followed)
        priority = {**{name: 1 for name in why_neighbour}, **{name: 1 for name in followed.skills},
                    **{name: 0 for name in why_skill}}
        selection = selection.model_copy(update={
            "base": base, "head": head, "changed_skills": sorted(why_skill), "changed_agents": sorted(changes.agents),
            "settings_changed": bool(changes.settings), "changed_paths": changes.paths, "described": described,
            "confused": followed.skills, "previous": confusions_mod.results_file(previous).as_posix()
            if previous is not None else None})
        if changes.settings:
            for case in library.cases:
                also = why_skill.get(case.skill) or why_neighbour.get(case.skill)
                chosen.append((case, f"settings changed: full ({', '.join(changes.settings)} changed in {span})"
                                     + (f"; skill {case.skill} {also}" if also else "")))
            notes.append(f"the runner's settings changed ({', '.join(changes.settings)}): every case, capped at "
                         f"[select] max_full_cases = {max_full_cases}")
        else:
            for case in library.cases:
                confused = followed.why(case)
                if case.skill in why_skill:
                    chosen.append((case, f"skill {case.skill} {why_skill[case.skill]}"))
                elif case.skill in why_neighbour:
                    chosen.append((case, f"skill {case.skill} {why_neighbour[case.skill]}"
                                         + (f"; {confused}" if confused else "")))
                elif confused:
                    chosen.append((case, confused))
            if why_skill:
                notes.append(f"pr: {len(why_skill)} changed skill(s) ({', '.join(sorted(why_skill))}) and "
                             f"{len(why_neighbour)} neighbour(s) ({', '.join(sorted(why_neighbour)) or 'none'})")
            else:
                shown = ", ".join(changes.paths[:5]) + (" …" if len(changes.paths) > 5 else "")
                notes.append(f"nothing that selects cases changed in {span}: no skill folder under "
                             f"{', '.join(library.layout.roots) if library.layout else library.skills_dir}, no subagent named by a skill, no settings file "
                             f"({', '.join(settings_paths)}); "
                             + changed_paths_text(changes.paths, repository_changes(Path(library.root), base, head))
                             + (f": {shown}" if shown else "") + " — no cases selected")
        if followed_note:
            notes.append(followed_note)

    narrowed: list[tuple[Case, str]] = []
    for case, why in chosen:
        if keep is not None and case.skill not in keep:
            continue
        if case_patterns and not any(fnmatch.fnmatchcase(case.uid, p) for p in case_patterns):
            continue
        if keep is not None:
            why += f"; narrowed to skill {case.skill} ({keep[case.skill]})"
        if case_patterns:
            why += f"; uid matches {' or '.join(case_patterns)}"
        narrowed.append((case, why))
    if keep is not None or case_patterns:
        notes.append(f"narrowed by {'skill ' + ', '.join(skills) if skills else ''}"
                     f"{' and ' if skills and case_patterns else ''}"
                     f"{'case ' + ', '.join(case_patterns) if case_patterns else ''}: {len(narrowed)} of "
                     f"{len(chosen)} case(s)")
    if routing:
        narrowed = _routing_only(narrowed, notes)
    capped = False
    if tier == "pr" and selection.settings_changed and len(narrowed) > max_full_cases:
        uncapped = len(narrowed)
        narrowed = _cap(narrowed, priority, max_full_cases)
        capped = True
        notes.append(f"capped: {len(narrowed)} of {uncapped} case(s) (changed skills first, then their neighbours, "
                     "then a round-robin over the other skills)")
    cases = [SelectedCase(uid=case.uid, skill=case.skill, why=why) for case, why in narrowed]
    return selection.model_copy(update={"cases": cases, "capped": capped, "note": "; ".join(notes)})


def _routing_only(chosen: list[tuple[Case, str]], notes: list[str]) -> list[tuple[Case, str]]:
    """The routing cases among those chosen (`route`), each saying so, and a note with the count."""
    kept = [(case, f"{why}; a routing case ({case.kind})") for case, why in chosen if is_routing(case)]
    notes.append(f"routing cases only: {len(kept)} of {len(chosen)} case(s) name a skill that must fire or stay "
                 "silent")
    return kept
