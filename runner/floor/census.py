"""`skill-evals census`: what a library's eval corpus really contains.

Counts come only from the loaded corpus; every classification is listed with the rule that made
it, so an author can check the runner's reading of their files before anything runs.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from runner.corpus import classify, kind_words
from runner.corpus.findings import Finding, counts
from runner.corpus.library import Library, UnreadFile, is_subagent, subagent_name
from runner.corpus.settings import Settings
from runner.floor.validate import manual_only_targets
from runner.hosts.listing import ListingEstimate, estimate

SCHEMA_VERSION = 1
TRIGGER_EVALS = "trigger-evals.json"
# Seed 000 rules a script cannot check: a person reviews each probe against them.
PROBE_REVIEW_ITEMS = (
    "rule 3: the defects are independent (catching one does not make another obvious)",
    "rule 4: the artifact is work, not a quiz (the task the skill exists for; the defect is in the material)",
    "rule 7: the defect is realistic (something a real contributor would plausibly write)",
)


class CaseRef(BaseModel):
    uid: str
    rule: str | None = None
    detail: str | None = None


class SkillCounts(BaseModel):
    total: int
    templates: list[str]
    real: int
    manual_only: list[str]
    with_evals: int = Field(description="Skills with at least one eval file read, in any format the runner reads.")
    with_trigger_evals: int = Field(description="Skills with a file named trigger-evals.json read (Aegis's "
                                                "discrimination set or a trigger query set under that name).")
    with_probes: int
    folders: dict[str, str] = Field(default={}, description="Skill name -> its folder, relative to the repository.")
    eval_files: dict[str, list[str]] = Field(default={}, description="Skill name -> the eval files read as its.")


class CaseCounts(BaseModel):
    total: int
    by_source: dict[str, int]
    by_type: dict[str, int]
    by_kind: dict[str, int]
    by_format: dict[str, int] = {}
    by_label: dict[str, int] = {}
    by_file: dict[str, int] = Field(default={}, description="Eval file -> the cases read from it (template "
                                                            "example cases included): one file, one set of cases.")
    template_cases_not_run: int
    unreadable_files: list[CaseRef] = Field(default=[], description="Eval files of which no case could be read (not "
                                                                     "counted as cases: how many they hold is not "
                                                                     "known); each is one UNRUN entry of a run.")


class Refusals(BaseModel):
    total: int
    by_rule: dict[str, int]
    cases: list[CaseRef]


class PatternBreaks(BaseModel):
    refusal_like_ids_typed_no_trigger: list[CaseRef]
    halt_cases: list[CaseRef]
    decided_by_override_or_fallback: list[CaseRef]
    # Cases whose prompt invokes their own skill by hand: the kind is the prompt's (runner.corpus.classify).
    explicit_invocations: list[CaseRef] = []


class KindRules(BaseModel):
    """Cases whose kind a rule of the runner decided, not a field of the file (runner.corpus.kind_words.by_heuristic)."""

    total: int = 0
    by_rule: dict[str, int] = {}
    cases: list[CaseRef] = []


class AssertionCensus(BaseModel):
    total: int
    by_class: dict[str, int]
    by_rule: dict[str, int]
    by_kind_and_class: dict[str, dict[str, int]]
    unjudgeable: list[CaseRef]
    artifact_shape: list[CaseRef]


class WorkspacePrompts(BaseModel):
    total: int
    by_signal: dict[str, int]
    cases: list[CaseRef]


class ManualOnly(BaseModel):
    skills: list[str]
    cases_targeting: int = Field(description="Cases that need the model to pick a manual-only skill on its own: UNRUN.")
    by_source: dict[str, int]
    cases: list[str]
    invoked_by_hand: list[str] = Field(default=[], description="Cases that invoke a manual-only skill by hand "
                                                                "(`/name ...`): the host expands them, they run.")


class Subagents(BaseModel):
    defined: list[str]
    expected_skill: list[CaseRef]
    overlaps_with: list[CaseRef]
    should_not_trigger: list[CaseRef]


class ProbeSummary(BaseModel):
    uid: str
    kind: str
    seeded_defects: int
    shapes: list[str]
    modifiers: list[str]
    content_hash: str
    review_items: list[str]


class Census(BaseModel):
    schema_version: int = SCHEMA_VERSION
    library: dict[str, Any]
    skills: SkillCounts
    cases: CaseCounts
    refusals: Refusals
    pattern_breaks: PatternBreaks
    kind_rules: KindRules = KindRules()
    assertions: AssertionCensus
    workspace_prompts: WorkspacePrompts
    manual_only: ManualOnly
    subagents: Subagents
    listing: ListingEstimate
    probes: list[ProbeSummary]
    not_read: list[UnreadFile] = Field(default=[], description="Eval-looking files found and not read, with why.")
    findings: dict[str, int]


def _file_name(shown: str) -> str:
    return shown.rsplit("/", 1)[-1]


def _counter(values: list[str]) -> dict[str, int]:
    return dict(sorted(Counter(values).items(), key=lambda kv: (-kv[1], kv[0])))


def compute(library: Library, settings: Settings, findings: list[Finding]) -> Census:
    cases, unreadable = library.read_cases(), library.unreadable_files()
    skills = list(library.skills.values())
    evals_cases = [c for c in cases if c.source == "evals"]
    refusals = [c for c in cases if c.kind == "refusal"]
    assertions = [(c, a) for c in cases for a in c.assertions]
    manual = [c for group in manual_only_targets(library).values() for c in group]
    manual_skills = {s.name for s in skills if s.manual_only}
    workspace = [c for c in cases if c.workspace_signals]
    kind_class: dict[str, Counter[str]] = {}
    guessed = [c for c in cases if kind_words.by_heuristic(c.kind_rule)]
    for case, assertion in assertions:
        kind_class.setdefault(case.kind, Counter())[assertion.assertion_class] += 1
    return Census(
        library={"root": library.root, "skills_dir": library.skills_dir, "agents_dir": library.agents_dir,
                 "agents_dirs": library.layout.agents_dirs if library.layout else [],
                 "content_hash": library.content_hash,
                 **({"layout": library.layout.kind, "layout_description": library.layout.description,
                     "roots": library.layout.roots, "layout_note": library.layout.note,
                     "candidates": library.layout.candidates} if library.layout else {})},
        skills=SkillCounts(
            total=len(skills), templates=sorted(s.name for s in skills if s.template),
            real=sum(1 for s in skills if not s.template),
            manual_only=sorted(s.name for s in skills if s.manual_only),
            # Counted from the files read, whatever their format, never from one format's file names: a census
            # keyed on Aegis names said "0 with evals" of libraries whose every skill had skill-creator files.
            with_evals=sum(1 for s in skills if s.eval_files),
            with_trigger_evals=sum(1 for s in skills if any(_file_name(f) == TRIGGER_EVALS for f in s.eval_files)),
            with_probes=len({p.skill for p in library.probes}),
            folders={s.name: s.dir for s in skills},
            eval_files={s.name: list(dict.fromkeys(s.eval_files)) for s in skills},
        ),
        cases=CaseCounts(
            total=len(cases), by_source=_counter([c.source for c in cases]),
            by_type=_counter([c.case_type or f"({c.format})" for c in evals_cases]),
            by_kind=_counter([c.kind for c in cases]), by_format=_counter([c.format for c in cases]),
            by_label=_counter([c.label for c in cases if c.label]),
            by_file=dict(Counter(c.file for c in [*cases, *library.template_cases])),
            template_cases_not_run=len(library.template_cases),
            unreadable_files=[CaseRef(uid=c.uid, rule=c.kind_rule, detail=f"{c.file}:{c.line}") for c in unreadable],
        ),
        refusals=Refusals(total=len(refusals), by_rule=_counter([c.kind_rule for c in refusals]),
                          cases=[CaseRef(uid=c.uid, rule=c.kind_rule) for c in refusals]),
        pattern_breaks=PatternBreaks(
            refusal_like_ids_typed_no_trigger=[
                CaseRef(uid=c.uid, rule=c.kind_rule, detail="refusal-like id, typed should_not_trigger: run as "
                                                            "no_trigger (the type wins); override to change")
                for c in evals_cases if c.case_type == "should_not_trigger"
                and classify.looks_like_refusal_id(c.id, settings.classify)],
            halt_cases=[CaseRef(uid=c.uid, rule=c.kind_rule, detail=f"halt case, run as {c.kind}")
                        for c in evals_cases if classify.is_halt_id(c.id, settings.classify)],
            decided_by_override_or_fallback=[
                CaseRef(uid=c.uid, rule=c.kind_rule, detail=c.kind) for c in cases
                if c.kind_rule in ("override", "unknown-case-type", "schema-invalid", "type-triggers-conflict")],
            explicit_invocations=[CaseRef(uid=c.uid, rule=c.kind_rule, detail=c.kind) for c in cases
                                  if c.kind_rule == classify.EXPLICIT_INVOCATION],
        ),
        kind_rules=KindRules(total=len(guessed), by_rule=_counter([c.kind_rule for c in guessed]),
                             cases=[CaseRef(uid=c.uid, rule=c.kind_rule, detail=c.kind) for c in guessed]),
        assertions=AssertionCensus(
            total=len(assertions), by_class=_counter([a.assertion_class for _, a in assertions]),
            by_rule=_counter([a.class_rule for _, a in assertions]),
            by_kind_and_class={k: dict(v) for k, v in sorted(kind_class.items())},
            unjudgeable=[CaseRef(uid=f"{c.uid}#{a.index}", rule=a.class_rule, detail=a.text)
                         for c, a in assertions if a.assertion_class == "unjudgeable"],
            artifact_shape=[CaseRef(uid=f"{c.uid}#{a.index}", rule=a.class_rule, detail=" | ".join(a.hooks))
                            for c, a in assertions if a.assertion_class == "artifact_shape"],
        ),
        workspace_prompts=WorkspacePrompts(
            total=len(workspace), by_signal=_counter([s for c in workspace for s in c.workspace_signals]),
            cases=[CaseRef(uid=c.uid, rule=",".join(c.workspace_signals)) for c in workspace],
        ),
        manual_only=ManualOnly(skills=sorted(s.name for s in skills if s.manual_only), cases_targeting=len(manual),
                               by_source=_counter([c.source for c in manual]), cases=[c.uid for c in manual],
                               invoked_by_hand=[c.uid for c in cases if c.target in manual_skills
                                                and library.invoked_by_hand(c)]),
        subagents=Subagents(
            defined=sorted(library.agents),
            expected_skill=[CaseRef(uid=c.uid, detail=subagent_name(c.target)) for c in cases
                            if c.source == "trigger" and is_subagent(c.target)],
            overlaps_with=[CaseRef(uid=s.name, detail=subagent_name(n)) for s in skills for n in s.overlaps_with
                           if is_subagent(n)],
            should_not_trigger=[CaseRef(uid=c.uid, detail=subagent_name(n)) for c in cases
                                for n in c.should_not_trigger if is_subagent(n)],
        ),
        listing=estimate(library, settings.listing),
        probes=[ProbeSummary(uid=p.uid, kind=p.kind, seeded_defects=p.seeded_defects,
                             shapes=[d.shape for d in p.defects], modifiers=p.modifiers, content_hash=p.content_hash,
                             review_items=list(PROBE_REVIEW_ITEMS)) for p in library.probes],
        not_read=list(library.unread),
        findings=counts(findings),
    )


# ---- text view --------------------------------------------------------------------------------

def _table(title: str, rows: dict[str, int] | list[tuple[str, ...]], headers: tuple[str, ...] = ("", "count")) -> Table:
    table = Table(title=title, title_justify="left", show_edge=False, pad_edge=False)
    for index, header in enumerate(headers):
        table.add_column(header, justify="right" if index else "left")
    items = rows.items() if isinstance(rows, dict) else rows
    for row in items:
        table.add_row(*[f"{v:,}" if isinstance(v, int) else str(v) for v in row])
    return table


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _sample(refs: list[CaseRef], limit: int = 8) -> str:
    shown = ", ".join(r.uid for r in refs[:limit])
    return shown + (f" … and {len(refs) - limit} more" if len(refs) > limit else "")


def render_kind_rules(found: KindRules, console: Console, examples: int = 3) -> None:
    """Per rule, how many cases it decided and a few of them: what the author checks against their files."""
    if not found.total:
        return
    console.print(f"Kinds decided by a rule of the runner, not by a field of the file: {found.total} case(s)",
                  markup=False)
    for rule, count in found.by_rule.items():
        refs = [r for r in found.cases if r.rule == rule]
        shown = ", ".join(f"{r.uid} ({r.detail})" for r in refs[:examples])
        more = f" … and {count - examples} more (--format json lists each)" if count > examples else ""
        console.print(f"  {rule}: {count}: {shown}{more}", markup=False)


def render_text(census: Census, console: Console) -> None:
    s, c, a = census.skills, census.cases, census.assertions
    # Every root read: a header naming only the first of several misleads about what was counted. The library is
    # named by its folder, the roots as read inside it ("." is its root itself).
    read = ", ".join(r if r not in ("", ".") else "the repository root"
                     for r in census.library.get("roots") or [census.library["skills_dir"]])
    console.print(f"[bold]Census of {escape(Path(census.library['root']).name)}/[/bold], skills read from "
                  f"{escape(read)}  (content {census.library['content_hash'][:12]})")
    if census.library.get("layout"):
        console.print(f"Layout: {census.library['layout_description']}; read {', '.join(census.library['roots'])} "
                      f"({census.library['layout_note']})", markup=False)
    templates = f" ({', '.join(s.templates)})" if s.templates else ""
    console.print(f"Skills: {_plural(s.total, 'skill folder')}: {_plural(s.real, 'skill')}, "
                  f"{_plural(len(s.templates), 'template')}{templates}; {len(s.manual_only)} manual-only; "
                  f"{s.with_evals} with eval files read; {s.with_trigger_evals} with a trigger-evals.json; "
                  f"{s.with_probes} with probes; {_plural(len(census.subagents.defined), 'subagent')} defined",
                  markup=False)
    console.print(f"Cases: {c.total:,} (template example cases, not run: {c.template_cases_not_run})")
    if c.unreadable_files:
        console.print(f"Eval files of which no case could be read (their cases are not counted; `validate` says why): "
                      f"{len(c.unreadable_files)}: {', '.join(r.detail or r.uid for r in c.unreadable_files)}",
                      markup=False)
    console.print(_table("Cases by source", c.by_source))
    console.print(_table("evals.json cases by type", c.by_type))
    console.print(_table("Cases by kind (semantics §2)", c.by_kind))
    if c.by_label:
        console.print("Category tags (`type` / `kind` values that name no kind; labels only): "
                      + ", ".join(f"{k} {v}" for k, v in c.by_label.items()), markup=False)
    render_kind_rules(census.kind_rules, console)
    console.print(_table("Refusal cases: how each was recognised", census.refusals.by_rule, ("rule", "cases")))
    pb = census.pattern_breaks
    typed = pb.refusal_like_ids_typed_no_trigger
    console.print(f"Pattern breaks: {len(typed)} refusal-like id(s) typed should_not_trigger (run as no_trigger)"
                  + (f": {_sample(typed)}" if typed else ""), markup=False)
    console.print(f"  {len(pb.halt_cases)} halt case(s) (stop-*), run as trigger unless overridden")
    if pb.explicit_invocations:
        console.print(f"  {len(pb.explicit_invocations)} case(s) invoke their skill by hand (`/name ...`): the kind is "
                      f"the prompt's (explicit-invocation), not an id prefix's: {_sample(pb.explicit_invocations)}",
                      markup=False)
    if pb.decided_by_override_or_fallback:
        console.print(f"  decided by an override or a fallback: {_sample(pb.decided_by_override_or_fallback)}")
    console.print(_table(f"Assertions: {a.total:,} by class", a.by_class, ("class", "assertions")))
    console.print(_table("Assertion rules that fired", a.by_rule, ("rule", "assertions")))
    if a.unjudgeable:
        console.print("Unjudgeable as written (flagged to the author, never judged):")
        for ref in a.unjudgeable[:20]:
            console.print(f"  {ref.uid}: {ref.detail!r} [{ref.rule}]", markup=False)
        if len(a.unjudgeable) > 20:
            console.print(f"  … and {len(a.unjudgeable) - 20} more (see --format json)")
    w = census.workspace_prompts
    console.print(f"Prompts that may assume workspace files or a repo/PR: {w.total} "
                  f"({', '.join(f'{k} {v}' for k, v in w.by_signal.items())}); a heuristic, listed in --format json")
    m = census.manual_only
    console.print(f"Manual-only skills: {len(m.skills)}; cases that need the model to pick one on its own: "
                  f"{m.cases_targeting} ({', '.join(f'{k} {v}' for k, v in m.by_source.items())}): UNRUN "
                  f"manual-only-target; cases that invoke one by hand (`/name ...`), which run: {len(m.invoked_by_hand)}",
                  markup=False)
    sa = census.subagents
    console.print(f"(subagent) targets: {len(sa.expected_skill)} as expected_skill, {len(sa.overlaps_with)} in "
                  f"overlaps_with, {len(sa.should_not_trigger)} in should_not_trigger")
    li = census.listing
    console.print(f"Skill listing ({li.model}; {li.host}): {li.listed} listed skills need "
                  f"{li.total_chars_all_descriptions:,} characters with descriptions; the host lists "
                  f"{len(li.host_entries)} of its own, {li.host_fixed_chars:,} characters always kept; budget "
                  f"{li.budget_chars:,} " + (f"leaves {li.left_for_descriptions:,} for descriptions" if
                                             li.left_for_descriptions >= 0 else
                                             f"is exceeded by {-li.left_for_descriptions:,} with names alone") +
                  f" → "
                  f"{len(li.with_description)} keep their description, {len(li.name_only)} listed by name only "
                  f"(listing ≈ {li.estimated_listing_chars:,} characters). Measure the real listing with the surface "
                  "audit.")
    if li.unparsed_frontmatter:
        console.print(f"  The estimate is uncertain for {len(li.unparsed_frontmatter)} skill(s) whose frontmatter does "
                      f"not parse (their description is taken from the body; the host may read another): "
                      f"{', '.join(li.unparsed_frontmatter)}", markup=False)
    for probe in census.probes:
        console.print(f"Probe {probe.uid}: {probe.kind}, {probe.seeded_defects} defect(s) "
                      f"({', '.join(probe.shapes)}); review by a person: " + "; ".join(probe.review_items))
    if census.not_read:
        console.print(f"Eval files found and not read: {len(census.not_read)}")
        for unread in census.not_read[:20]:
            console.print(f"  {unread.file}: {unread.reason}", markup=False)
        if len(census.not_read) > 20:
            console.print(f"  … and {len(census.not_read) - 20} more (see --format json)")
    else:
        console.print("Eval files found and not read: none")
    f = census.findings
    console.print(f"Validation: {f['error']} error(s), {f['warning']} warning(s) (run `skill-evals validate` for details)")
