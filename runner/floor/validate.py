"""`skill-evals validate`: the floor every run stands on.

First the library's own structural validator (it always gates: a failure here fails the run),
then our checks on the loaded corpus: frontmatter by the Agent Skills spec, cross-references,
probe rules from seed 000. Schema, syntax and file-safety findings come from loading itself.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import regex

from runner.corpus import classify, executables
from runner.corpus.findings import Finding, display_path, error, info, warning
from runner.corpus.library import ANY_SKILL, Case, Library, Probe, Skill, is_kebab, is_subagent, subagent_name
from runner.corpus.settings import SETTINGS_FILE, Settings

DEFAULT_VALIDATOR = Path("scripts") / "validate-skills.py"
NAME_MAX = 64
DESCRIPTION_MAX = 1024
# The library's validator is code from the repository under review (maybe an untrusted PR). On the host it
# gets a minimal environment; that keeps secrets out of its environment, not out of its reach (runner.container.sandbox).
_VALIDATOR_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TMPDIR", "SYSTEMROOT")
_MAX_OUTPUT_CHARS = 20_000


# ---- the library's own validator --------------------------------------------------------------
#
# Where it runs is the caller's choice (an `Executor`): on this machine (`run_on_host`, for code the caller
# trusts) or in a throwaway container (runner.container.sandbox, for a pull request's code). What its exit status and
# output mean is decided here, the same way for both.

@dataclass(frozen=True)
class LibraryValidator:
    command: list[str]
    shown: str  # what to call it in findings
    script: Path | None = None  # the default validator's script (its command is `python <script>`)


@dataclass(frozen=True)
class ValidatorRun:
    """What running the validator gave: an exit status and its output (stdout and stderr, interleaved), or why
    there is none (it did not finish in time; it could not be started)."""
    returncode: int | None
    output: bytes = b""
    timed_out: bool = False
    start_error: str | None = None


Executor = Callable[[Path, LibraryValidator, float], ValidatorRun]

VALIDATOR_DISABLED = "validator-disabled"


def validator_disabled(settings_file: str, line: int, validator: LibraryValidator | None) -> Finding:
    """The library's validator switched off by the settings: a warning every report repeats (runner.floor.gate
    ANNOUNCED_RULES), so that a floor without it is never taken for a floor that passed."""
    which = f"`{validator.shown}`" if validator is not None else "none is configured or found"
    return warning(VALIDATOR_DISABLED, settings_file, line,
                   f"the library's own validator ({which}) is switched off by [validator] enabled = false and was "
                   "not run: the floor is the runner's own checks only")


def find_library_validator(root: Path, settings: Settings, command: str | None) -> LibraryValidator | None:
    configured = command or settings.validator.command
    if configured:
        return LibraryValidator(command=shlex.split(configured), shown=configured)
    script = root / DEFAULT_VALIDATOR
    if script.is_file():
        return LibraryValidator(command=[sys.executable, str(script)], shown=DEFAULT_VALIDATOR.as_posix(),
                                script=script)
    return None


def run_on_host(root: Path, validator: LibraryValidator, timeout_s: float) -> ValidatorRun:
    """On this machine, as this user, with a minimal environment. Not a boundary: the code can read this
    process's environment through /proc and write anything this user can (runner.container.sandbox is the boundary)."""
    env = {k: v for k, v in os.environ.items() if k in _VALIDATOR_ENV or k.startswith("LC_")}
    try:
        done = subprocess.run(validator.command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return ValidatorRun(returncode=None, timed_out=True)
    except OSError as exc:
        return ValidatorRun(returncode=None, start_error=str(exc.strerror or exc))
    return ValidatorRun(returncode=done.returncode, output=done.stdout)


def run_library_validator(root: Path, validator: LibraryValidator | None, timeout_s: float,
                          execute: Executor = run_on_host) -> list[Finding]:
    if validator is None:
        # A finding names a file that exists: the settings file when the library has one, else the root itself.
        where = SETTINGS_FILE if (root / SETTINGS_FILE).is_file() else "."
        return [info("library-validator-missing", where, 1,
                     f"no library validator configured or found (looked for {DEFAULT_VALIDATOR.as_posix()}); "
                     "set [validator] command in .skill-evals.toml to run yours first")]
    done = execute(root, validator, timeout_s)
    if done.timed_out:
        return [error("library-validator", validator.shown, 1,
                      f"the library's validator `{validator.shown}` did not finish in {timeout_s:g} s")]
    if done.start_error is not None or done.returncode is None:
        return [error("library-validator", validator.shown, 1,
                      f"the library's validator `{validator.shown}` could not start: {done.start_error}")]
    output = done.output.decode("utf-8", errors="replace")
    if len(output) > _MAX_OUTPUT_CHARS:
        output = "[... earlier output cut ...]\n" + output[-_MAX_OUTPUT_CHARS:]
    if done.returncode != 0:
        return [error("library-validator", validator.shown, 1,
                      f"the library's own validator failed (exit {done.returncode}); it gates every run",
                      detail=output or "(no output)")]
    last = output.strip().splitlines()[-1] if output.strip() else "no output"
    return [info("library-validator-passed", validator.shown, 1, f"the library's own validator passed: {last}")]


# ---- frontmatter (Agent Skills spec) ----------------------------------------------------------

def check_frontmatter(skill: Skill) -> list[Finding]:
    if not skill.frontmatter_ok:
        return []
    out: list[Finding] = []
    file, fields, lines = skill.skill_md, skill.fields, skill.key_lines
    name = fields.get("name")
    if not isinstance(name, str) or not name:
        out.append(error("name-missing", file, lines.get("name", 2), "frontmatter needs a `name` (the folder name)"))
    else:
        line = lines["name"]
        if name != skill.folder_name:
            out.append(error("name-mismatch", file, line,
                             f"`name` is {name!r} but the folder is {skill.folder_name!r}; they must be equal"))
        if not skill.template and not is_kebab(name):
            out.append(error("name-format", file, line,
                             f"`name` {name!r} must be lowercase kebab-case (a-z, 0-9, single hyphens)"))
        if len(name) > NAME_MAX:
            out.append(error("name-too-long", file, line, f"`name` has {len(name)} characters; at most {NAME_MAX}"))
    description = fields.get("description")
    line = lines.get("description", 2)
    if not isinstance(description, str) or not description.strip():
        out.append(error("description-missing", file, line,
                         "frontmatter needs a non-empty `description`: it is all the model sees when it picks skills"))
    elif len(description) > DESCRIPTION_MAX:
        out.append(error("description-too-long", file, line,
                         f"`description` is {len(description)} characters (parsed value); at most {DESCRIPTION_MAX}"))
    flag = fields.get("disable-model-invocation")
    if flag is not None and not isinstance(flag, bool):
        out.append(warning("manual-only-flag", file, lines.get("disable-model-invocation", 2),
                           f"`disable-model-invocation` should be true or false, found {flag!r}"))
    return out


# ---- cross-references -------------------------------------------------------------------------

def _exists(name: str, library: Library) -> bool:
    if is_subagent(name):
        return subagent_name(name) in library.agents
    return name in library.skills


def _dangling(name: str, field: str, file: str, line: int, library: Library) -> Finding:
    if is_subagent(name):
        where = f"{library.agents_dir or '.claude/agents'}/{subagent_name(name)}.md"
        return error("dangling-reference", file, line, f"{field} names subagent {name!r} but {where} does not exist")
    if library.layout is not None and library.layout.kind == "single-skill":
        return error("dangling-reference", file, line,
                     f"{field} names skill {name!r}, which is not in this library: --library names one skill, so "
                     "its neighbours are absent and the case cannot measure them. Point --library at the "
                     "repository to read them too")
    return error("dangling-reference", file, line,
                 f"{field} names skill {name!r}, which is not a folder of the library (a typo or a renamed skill?)")


def _about(findings: list[Finding], skill: str, uid: str | None = None) -> list[Finding]:
    """Say which skill (and case) each finding is about, so the floor holds back only that (runner.floor.gate)."""
    return [f.model_copy(update={"skill": f.skill or skill, "uid": f.uid or uid}) for f in findings]


def _case_references(case: Case, library: Library) -> list[Finding]:
    out: list[Finding] = []
    if case.target and case.target != ANY_SKILL and not _exists(case.target, library):
        out.append(_dangling(case.target, "expected_skill", case.file,
                             case.lines.get("expected_skill", case.line), library))
    for position, name in enumerate(case.should_not_trigger):
        line = case.lines.get(f"should_not_trigger/{position}", case.line)
        if not _exists(name, library):
            out.append(_dangling(name, "should_not_trigger", case.file, line, library))
        elif name == case.target:
            out.append(error("contradictory-case", case.file, line,
                             f"{name!r} is both the expected_skill and in should_not_trigger"))
    return out


def _routing_references(case: Case, library: Library) -> list[Finding]:
    """A routing case's named skills must be the library's (as `should_not_trigger` names are), and its parts must be
    able to hold together: a case that can never pass is the author's to fix, not a result."""
    spec = case.routing
    if spec is None:
        return []
    out: list[Finding] = []
    for part, names, key in (("must", spec.must_fire, "must_include / required_skills"),
                             ("must_not", spec.must_not_fire, "must_not_include / forbidden_skills")):
        for position, name in enumerate(names):
            line = case.lines.get(f"routing.{part}/{position}", case.line)
            if not _exists(name, library):
                out.append(_dangling(name, key, case.file, line, library))
            elif part == "must_not" and name in spec.must_fire:
                out.append(error("contradictory-case", case.file, line,
                                 f"{name!r} must fire and must not fire (it is in both the must and the must-not "
                                 "skills): the case can never pass"))
    own = [name for name in spec.must_fire if not is_subagent(name)]
    if spec.max_skills is not None and len(own) > spec.max_skills:
        out.append(error("contradictory-case", case.file, case.lines.get("routing.max_skills", case.line),
                         f"{len(own)} skills must fire ({', '.join(own)}) but max_skills is {spec.max_skills}: the "
                         "case can never pass"))
    return out


def check_references(library: Library) -> list[Finding]:
    out: list[Finding] = []
    for skill in library.skills.values():
        for name, line in zip(skill.overlaps_with, skill.overlaps_lines):
            if not _exists(name, library):
                out += _about([_dangling(name, "overlaps_with", skill.trigger_file or skill.dir, line, library)],
                              skill.name)
    for case in library.cases:
        if case.kind == "routing":
            out += _about(_routing_references(case, library), case.skill, case.uid)
            continue
        if case.source not in ("trigger", "routing") or case.kind == "invalid":
            continue
        out += _about(_case_references(case, library), case.skill, case.uid)
    return out


def manual_only_targets(library: Library) -> dict[str, list[Case]]:
    """Cases, by file, that need the model to pick a manual-only skill on its own. The host never lets it, so
    a trigger case could never pass and a no-trigger case could never fail: both stay UNRUN. A case whose
    prompt invokes the skill by hand (`/name ...`) is not one of them: the host expands it, and it runs."""
    by_file: dict[str, list[Case]] = defaultdict(list)
    for case in library.cases:
        if case.routing is not None:  # a routing case needs only its must skills to fire (runner.plan.planner)
            if any(library.skills[n].manual_only and not library.invoked_by_hand(case, n)
                   for n in case.routing.must_fire if n in library.skills):
                by_file[case.file].append(case)
            continue
        skill = library.skills.get(case.target)
        if skill and skill.manual_only and case.kind not in ("unknown", "invalid") \
                and not library.invoked_by_hand(case):
            by_file[case.file].append(case)
    return by_file


def check_manual_only(library: Library) -> list[Finding]:
    out = []
    for file, cases in sorted(manual_only_targets(library).items()):
        targets = sorted({name for c in cases for name in ([c.target] if c.routing is None else [
            m for m in c.routing.must_fire if m in library.skills and library.skills[m].manual_only])})
        ids = ", ".join(c.id for c in cases[:5]) + (f" and {len(cases) - 5} more" if len(cases) > 5 else "")
        out.append(warning(
            "manual-only-target", file, cases[0].line,
            f"{len(cases)} case(s) need the model to pick manual-only skill(s) {', '.join(targets)} on its own "
            f"({ids}); with disable-model-invocation: true the model never can, so a trigger case could never pass "
            "and a no-trigger case could never fail: they stay UNRUN (manual-only-target) on a host that keeps such "
            "a skill from the model (docs/hosts.md). A case whose prompt invokes the skill by hand (it starts with "
            "`/<name>`) runs: the host expands the command"))
    return out


# ---- probes (seed 000) ------------------------------------------------------------------------

def _signposts(probe: Probe, rules: classify.Rules) -> list[Finding]:
    out = []
    for number, line in enumerate(probe.question.splitlines(), start=1):
        lowered = line.lower()
        for phrase in rules.signposts:
            column = lowered.find(phrase)
            if column >= 0:
                out.append(error("probe-signpost", probe.question_file, number,
                                 f"signposting phrase {phrase!r} points the agent at the defect (seed 000 rule 6); "
                                 "hand over the work, not a quiz", col=column + 1))
    return out


def check_probe(probe: Probe, settings: Settings, rules: classify.Rules) -> list[Finding]:
    out: list[Finding] = []
    lines = probe.lines
    if probe.kind == "floor" and len(probe.defects) != 1:
        out.append(error("probe-floor-one-defect", probe.file, lines.get("defects", 1),
                         f"a floor probe has exactly one defect (seed 000 rule 1); this one has {len(probe.defects)}"))
    if probe.kind == "band" and len(probe.defects) < 2:
        out.append(error("probe-band-size", probe.file, lines.get("defects", 1),
                         "a band probe scores k of N defects and needs N >= 2; one defect is a floor probe "
                         "(seed 000 rules 1 and 2)"))
    seen_ids: set[str] = set()
    for defect in probe.defects:
        if defect.id in seen_ids:
            out.append(error("probe-defect-id", probe.file, defect.line,
                             f"defect id {defect.id!r} is used twice; band scores are kept per defect id"))
        seen_ids.add(defect.id)
    for position, pattern in enumerate(probe.patterns):
        try:
            regex.compile(pattern, flags=regex.VERSION0)  # the engine the grading uses (runner.probes.arms)
        except regex.error as exc:
            out.append(error("probe-pattern", probe.file, lines.get("discriminator", 1),
                             f"discriminator.patterns[{position}] is not a valid regular expression ({exc}); "
                             "escape it for a literal (e.g. `NOT_PROVEN` or `3\\.8\\.0`)"))
    if probe.seeded_defects != len(probe.defects):
        out.append(error("probe-seeded-defects", probe.file, lines.get("seeded_defects", 1),
                         f"seeded_defects is {probe.seeded_defects} but {len(probe.defects)} defect(s) are listed "
                         "(seed 000 rule 2: the count must be exact)"))
    for defect in probe.defects:
        found = probe.question.count(defect.locator)
        if found != 1:
            where = "does not occur" if found == 0 else f"occurs {found} times"
            out.append(error("probe-locator", probe.file, defect.line,
                             f"defect {defect.id}: its locator {where} in question.md; it must occur exactly once "
                             "(seed 000 rule 2)"))
    count = len(probe.question.splitlines())
    limit = settings.limits.max_probe_lines
    if count >= limit:
        out.append(error("probe-too-long", probe.question_file, limit,
                         f"question.md has {count} lines; keep it under {limit} (seed 000 rule 5: a long artifact "
                         "measures reading stamina)"))
    out.extend(_signposts(probe, rules))
    return out


def check_reused_questions(probes: list[Probe]) -> list[Finding]:
    """Seed 000: a scenario reused across probes trains toward itself. Two probes whose question.md are the same
    bytes measure one scenario twice: a review finding at each later copy, naming the first (never an error: each
    probe is still a valid measurement)."""
    first: dict[bytes, Probe] = {}
    out = []
    for probe in sorted(probes, key=lambda p: p.question_file):
        digest = hashlib.sha256(probe.question.encode()).digest()
        original = first.setdefault(digest, probe)
        if original is not probe:
            out.append(warning("probe-question-reused", probe.question_file, 1,
                               f"question.md of probe {probe.uid} is byte-identical to {original.question_file} "
                               f"(probe {original.uid}): a scenario reused across probes trains toward itself "
                               "(seed 000); give each probe its own artifact", skill=probe.skill))
    return out


def check_invoked_negatives(library: Library) -> list[Finding]:
    """A negative control the author wrote as one (`should_trigger: false`, a negative type) whose prompt invokes its
    own skill by hand: the written field decides the kind (runner.corpus.classify), but the host expands the command,
    so the skill fires and the case can only FAIL. Said once per case, where it is written."""
    return [warning("explicit-invocation-no-trigger", case.file, case.line,
                    f"case {case.id!r} is written as a negative control ({case.kind_rule}) but its prompt invokes "
                    f"{case.target} by hand (`/{case.target} ...`): the host expands the command, so the skill fires "
                    "and the case can only FAIL; drop the slash command to ask whether the model picks it, or mark "
                    "it should_trigger: true to judge what the skill does once invoked", uid=case.uid)
            for case in library.cases if case.kind == "no_trigger" and library.invoked_by_hand(case)]


# ---- all checks -------------------------------------------------------------------------------

def check_library(library: Library, settings: Settings) -> list[Finding]:
    rules = classify.packaged_rules()
    out: list[Finding] = []
    for skill in library.skills.values():
        out.extend(_about(check_frontmatter(skill), skill.name))
    out.extend(check_references(library))
    out.extend(check_manual_only(library))
    out.extend(check_invoked_negatives(library))
    # What the host would run as a program (hooks, inline shell, MCP servers, host configuration among case files).
    out.extend(executables.check_library(library, settings.limits.max_file_bytes))
    for probe in library.probes:
        # A broken probe holds back that probe only: the skill's other cases do not depend on it.
        out.extend(_about(check_probe(probe, settings, rules), probe.skill, probe.uid))
    out.extend(check_reused_questions(library.probes))
    return out


def shown_root(root: Path) -> str:
    return display_path(root, Path.cwd())
