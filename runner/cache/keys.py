"""The key of a case's attempts: a hash of everything that can change what an attempt of the case observes.

An attempt's outcome depends on the case (its prompt, files, expectations, assertions), on what the session is
shown (the listing: every skill's name and the description that reaches the model, the budget, the subagents),
on the skills it can load (the target's and the named neighbours' folders, as a session receives them: without
the answer key), on the host and its version, the model and every bound of a session, on the judge for prose
assertions, and on this harness. `case_key` hashes all of it. Skills a cached attempt fired besides those are
checked when the entry is read (runner.cache.reuse): an edit to a sibling that took the prompt re-runs the case.

Design notes: docs/design/result-cache.md.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Any

import runner
from runner.corpus import bounded
from runner.corpus.files import ReadPolicy, make_policy
from runner.corpus.library import Case, Library
from runner.hosts.surface import Surface

# Bumped when an entry's meaning changes (what a key covers, what an entry holds): older entries are misses.
CACHE_FORMAT = 1


def digest(value: Any) -> str:
    """sha256 (hex) of a JSON value in one canonical form."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode("ascii")).hexdigest()


@lru_cache(maxsize=1)
def harness_version() -> str:
    """The package version and a hash of its own files: a change to how sessions are run or graded (code, the
    listing table, the rules) is a new harness, so nothing it would decide differently is reused."""
    root = Path(runner.__file__).parent
    sums = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".json", ".yaml") and "testing" not in path.relative_to(root).parts \
                and path.is_file():
            sums.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
    return f"{runner.__version__}+{sums.hexdigest()[:12]}"


def folder_digest(folder: Path, hidden: frozenset[str], policy: ReadPolicy) -> str:
    """sha256 over the files a session receives of one skill folder (paths relative to it and their bytes): the
    answer key (`hidden`, relative paths) and what the library's read policy refuses are left out, as the session
    workspace leaves them out. Links are not followed (a linked folder is named, as the loader's hash does)."""
    sums = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        here = Path(dirpath)
        relative = here.relative_to(folder).as_posix()
        dirnames[:] = sorted(d for d in dirnames if _inside(relative, d) not in hidden)
        for name in sorted(filenames):
            shown = _inside(relative, name)
            path = here / name
            if shown in hidden or not policy.inside(path):
                continue
            try:
                data = bounded.read_bytes(path, policy.max_bytes)
            except OSError:
                continue  # a file the session would not receive either
            sums.update(shown.encode("utf-8", "surrogateescape") + b"\0" + hashlib.sha256(data).digest())
    return sums.hexdigest()


def _inside(relative: str, name: str) -> str:
    return name if relative == "." else f"{relative}/{name}"


def file_digest(path: Path, policy: ReadPolicy) -> str | None:
    try:
        return hashlib.sha256(bounded.read_bytes(path, policy.max_bytes)).hexdigest() if policy.inside(path) else None
    except OSError:
        return None


@dataclass(frozen=True)
class Folders:
    """Each skill's folder digest and the subagents' files, computed once per run."""

    skills: dict[str, str]
    agents: str

    @classmethod
    def of(cls, library: Library, max_bytes: int) -> Folders:
        root = Path(library.root)
        policy = make_policy([root], root, max_bytes)
        hidden = library.hidden_files()
        skills = {name: folder_digest(path, hidden.get(name, frozenset()), policy)
                  for name, path in sorted(library.skill_paths().items())}
        agents = digest({name: file_digest(path, policy) for name, path in sorted(library.agent_paths().items())})
        return cls(skills=skills, agents=agents)


@dataclass(frozen=True)
class RunContext:
    """What every session of a run shares and an attempt's outcome depends on."""

    host: str
    versions: dict[str, str]
    model: str
    max_turns: int
    timeout_s: float
    max_output_tokens: int
    allowed_tools: tuple[str, ...]
    decide_early: bool
    listing: tuple[tuple[str, str | None], ...]  # (name, the description the model is shown, or None: name only)
    listing_budget_chars: int | None
    judge: tuple[str, str] | None  # (model, prompt version); None: no judge
    folders: Folders

    @cached_property
    def digest(self) -> str:
        """One hash of all of it, computed once per run (every case key includes it)."""
        return digest({"format": CACHE_FORMAT, "harness": harness_version(), "host": self.host,
                       "versions": self.versions, "model": self.model, "max_turns": self.max_turns,
                       "timeout_s": self.timeout_s, "max_output_tokens": self.max_output_tokens,
                       "allowed_tools": list(self.allowed_tools), "decide_early": self.decide_early,
                       "listing": [list(entry) for entry in self.listing],
                       "listing_budget_chars": self.listing_budget_chars, "agents": self.folders.agents})


def listing_of(library: Library, surface: Surface | None) -> tuple[tuple[str, str | None], ...]:
    """Every skill of the library the model is shown and what of it: from the surface audit when there is one
    (a skill listed by name only shows no description), else every model-invocable skill with its description
    (what the host would list with room for all)."""
    skills = library.skills
    if surface is not None and surface.error is None:
        shown = [(name, skills[name].description if name in skills else None) for name in surface.with_description]
        shown += [(name, None) for name in surface.name_only]
        return tuple(sorted(shown, key=lambda entry: entry[0]))
    return tuple((name, skill.description) for name, skill in sorted(skills.items()) if not skill.manual_only)


def case_fields(case: Case, policy: ReadPolicy) -> dict[str, Any]:
    """What the case itself says, as far as a session or its grading can see it."""
    files_dir = Path(case.files_dir) if case.files_dir else None
    fields: dict[str, Any] = {
        "prompt": case.prompt, "kind": case.kind, "target": case.target, "triggers": case.triggers,
        "should_not_trigger": case.should_not_trigger, "expected_output": case.expected_output,
        "workspace_signals": case.workspace_signals,
        "assertions": [[a.text, a.assertion_class, a.hooks, a.shape_only] for a in case.assertions],
        "files": [[name, file_digest(files_dir / name, policy) if files_dir else None] for name in case.files],
        # Only a routing case carries the key: every other case's key stays what it was.
        **({"routing": case.routing.model_dump(mode="json")} if case.routing is not None else {}),
    }
    if case.activation_part_only:  # a routing sweep's copy: another measurement (a key of a full run stays as it was)
        fields["activation_part_only"] = True
    return fields


def case_key(context: RunContext, case: Case, library: Library, arms: list[str], policy: ReadPolicy) -> str:
    """The key of one case's attempts in this run's context. `arms`: the plan's arms for the case (a baselined
    output case runs a control arm without its skill)."""
    folders = context.folders.skills
    named = sorted({case.skill, case.target, *case.should_not_trigger,
                    *(case.routing.names() if case.routing else [])} & set(folders))
    return digest({"context": context.digest, "case": case_fields(case, policy), "arms": arms,
                   "skills": {name: folders[name] for name in named},
                   "judge": list(context.judge) if case.judged and context.judge else None})


def surface_key(host: str, versions: dict[str, str], model: str, budget: int | None, allowed_tools: list[str],
                library: Library, folders: Folders) -> str:
    """What decides a surface audit's capture: the host and its version, the settings that reach it, and every
    skill's listing inputs (name, frontmatter, whether the model may invoke it) and the subagents."""
    skills = {name: [skill.fields, skill.manual_only, skill.description] for name, skill in
              sorted(library.skills.items())}
    return digest({"format": CACHE_FORMAT, "harness": harness_version(), "host": host, "versions": versions,
                   "model": model, "budget": budget, "allowed_tools": allowed_tools, "skills": skills,
                   "agents": folders.agents})
