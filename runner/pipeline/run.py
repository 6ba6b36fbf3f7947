"""A run from start to end: floor, selection, host, surface audit, plan, execution, results.

The CLI calls these functions; they hold no state between calls. Credentials go to the host explicitly, never
through the environment. One process per run folder (RunDir.claim); every reading that counts goes through
runner.results.vetting.

Design notes: docs/design/run-folder-and-records.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from runner.cache import reuse as reuse_mod
from runner.cache.folder import LAST_ROUTING, Store
from runner.cache.keys import Folders, RunContext, listing_of, surface_key
from runner.core.errors import UsageError
from runner.core.host_traits import API_VARIABLES, ApiFamily, traits
from runner.corpus import bounded
from runner.corpus.files import make_policy
from runner.corpus.findings import Finding
from runner.corpus.library import Case, Library, Probe
from runner.corpus.settings import MAX_REPEATS, ListingSettings, RunSettings, Settings, TierSettings
from runner.execute import reconcile as reconcile_mod
from runner.execute.budget import Journal, Ledger, Reconciled, journal_totals
from runner.execute.executor import STOP_CANCELLED, Dispatch, Executor, RunState, until_signalled
from runner.execute.rundir import PLAN, RESERVATIONS, RESULTS, SURFACE, AttemptRecord, RunDir
from runner.floor.gate import FloorGate
from runner.hosts import prices as prices_mod
from runner.hosts import registry as host_registry
from runner.hosts.base import Host
from runner.hosts.surface import Surface
from runner.judge import agreement
from runner.judge.prose import Grader, Judge, JudgeSettingsView, prompt_version
from runner.plan import confusions, planner, sweep
from runner.plan import quarantine as quarantine_mod
from runner.plan.plan import CachedFrom, Plan, PlannedCase, ProbeGate, RuleOf
from runner.plan.select import Selection, is_routing, select_configured
from runner.probes import calibration as probe_calibration
from runner.results import build as results_mod
from runner.results import modelfile, vetting
from runner.results.build import LostInFlight, ReconciledSpend
from runner.results.vetting import RefusedRecord

KILL_SWITCH_ENV = "SKILL_EVALS_DISABLED"
HOW_TO_GET_RESULTS = ("no ANTHROPIC_API_KEY reached this run, so nothing was executed: every case that could run "
                      "is UNRUN (no-credentials), the others keep the plan's own reason. Set ANTHROPIC_API_KEY (in "
                      "CI: a repository secret passed to the action) to execute the cases.")
HOW_TO_RESUME = "With the key set, `skill-evals run --resume {folder}` executes this run's plan."
RESUMED_WITHOUT_KEY = ("no ANTHROPIC_API_KEY reached this resume, so nothing more was executed: the cases that "
                       "finished keep their results, the attempts not run yet are UNRUN (no-credentials). Set "
                       "ANTHROPIC_API_KEY and resume again: `skill-evals run --resume {folder}`.")


ANTHROPIC: ApiFamily = "anthropic-messages"  # the judge's API, and the Claude Code hosts'


@dataclass(frozen=True)
class Credentials:
    """The Anthropic key and endpoint (the judge's, and the hosts' that speak the Messages API), and the other APIs'
    by family (runner.core.host_traits.API_VARIABLES): a host is given its own API's key only (`for_host`)."""

    api_key: str | None
    base_url: str | None
    others: dict[str, tuple[str | None, str | None]] = field(default_factory=dict)

    def for_host(self, host: str) -> Credentials:
        """The key and endpoint of the host's API (its traits' `api`)."""
        family = traits(host).api
        if family == ANTHROPIC:
            return Credentials(api_key=self.api_key, base_url=self.base_url)
        key, url = self.others.get(family, (None, None))
        return Credentials(api_key=key, base_url=url)


def key_variable(host: str) -> str:
    """The variable the host's key is read from (ANTHROPIC_API_KEY, GEMINI_API_KEY, OPENAI_API_KEY)."""
    return API_VARIABLES[traits(host).api][0]


def for_key_of(text: str, host: str) -> str:
    """A sentence about the Anthropic key (HOW_TO_GET_RESULTS, RESUMED_WITHOUT_KEY) about the host's own key."""
    return text.replace("ANTHROPIC_API_KEY", key_variable(host))


def credentials_from_env(environ: dict[str, str] | os._Environ[str]) -> Credentials:
    others = {family: (environ.get(key) or None, environ.get(url) or None)
              for family, (key, url) in API_VARIABLES.items() if family != ANTHROPIC}
    return Credentials(api_key=environ.get("ANTHROPIC_API_KEY") or None,
                       base_url=environ.get("ANTHROPIC_BASE_URL") or None, others=others)


def kill_switch(settings: Settings, environ: dict[str, str] | os._Environ[str]) -> bool:
    return settings.run.disabled or environ.get(KILL_SWITCH_ENV, "").strip().lower() in ("1", "true", "yes")


@dataclass
class Options:
    """What the command line may change for one run (everything else comes from settings)."""

    tier: str = "full"
    skills: tuple[str, ...] = ()
    cases: tuple[str, ...] = ()
    neighbours: bool = False
    host: str | None = None
    model: str | None = None
    repeats: int | None = None
    quorum: int | None = None
    max_usd: float | None = None
    concurrency: int | None = None
    early_stop: bool | None = None
    verdict: str | None = None  # quorum | sequential: instead of [tiers.<tier>] / [run] verdict
    baseline: bool | None = None
    batch: bool = False
    max_turns: int | None = None
    timeout_s: float | None = None
    listing_budget: int | None = None
    judge_model: str | None = None
    no_judge: bool | None = None
    shard: tuple[int, int] | None = None
    base: str | None = None
    head: str | None = None
    period: str | None = None
    selection_file: Path | None = None
    previous: Path | None = None  # --tier pr: an earlier run whose routing matrix's confusions the selection follows
    routing: bool = False  # only the routing cases (`route`, `plan --routing`)
    quarantine_file: Path | None = None  # instead of the repository's .skill-evals/quarantine.json
    cache: Path | None = None  # the result cache folder, instead of [run] cache
    no_cache: bool = False  # no result cache, whatever the settings say
    cache_read_only: bool = False  # take from the cache, add nothing to it (a pull request's run)
    cache_label: str = ""  # where this run runs, recorded with the entries it adds (e.g. the CI run)


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """`i/n` (1-based) -> (i, n); a usage error (ValueError) otherwise."""
    if not text:
        return None
    index, sep, count = text.partition("/")
    if not sep or not index.isdigit() or not count.isdigit() or not 1 <= int(index) <= int(count):
        raise ValueError(f"--shard takes i/n with 1 <= i <= n, got {text!r}")
    return int(index), int(count)


def in_shard(position: int, shard: tuple[int, int] | None) -> bool:
    """Cases are dealt round-robin in plan order: every shard plans the same cases, runs its own."""
    return shard is None or position % shard[1] == shard[0] - 1


# The command-line option that sets each settings field, for messages.
OPTION_OF = {"host": "--host", "model": "--model", "max_usd": "--max-usd", "concurrency": "--concurrency",
             "max_turns": "--max-turns", "timeout_s": "--timeout", "early_stop": "--no-early-stop",
             "budget_chars": "--listing-budget"}


def _option_problem(exc: ValidationError) -> str:
    problem = exc.errors()[0]
    field_name = str(problem["loc"][0]) if problem["loc"] else ""
    return f"{OPTION_OF.get(field_name, field_name)} {problem.get('input')!r}: {problem['msg']}"


def apply_options(settings: Settings, options: Options) -> tuple[Settings, TierSettings]:
    """The settings with the options applied, each checked as the settings file's value would be (a bound, a
    finite number, k against N). Raises ValueError with one line naming the option; a value of 0 is a value,
    never "not given"."""
    run_update = {k: v for k, v in {
        "host": options.host, "model": options.model, "max_usd": options.max_usd,
        "concurrency": options.concurrency, "max_turns": options.max_turns, "timeout_s": options.timeout_s,
        "early_stop": options.early_stop,
    }.items() if v is not None}
    try:
        run = RunSettings.model_validate({**settings.run.model_dump(), **run_update})
        if run.host in run.host_models:  # the host's own model outranks the run's (--model included)
            run = run.model_copy(update={"model": run.host_models[run.host]})
        listing = ListingSettings.model_validate({**settings.listing.model_dump(), **(
            {"budget_chars": options.listing_budget} if options.listing_budget is not None else {})})
    except ValidationError as exc:
        raise ValueError(_option_problem(exc)) from None
    judge = settings.judge.model_copy(update={k: v for k, v in {
        "model": options.judge_model, "enabled": False if options.no_judge else None}.items() if v is not None})
    base = getattr(settings.tiers, options.tier)
    repeats = options.repeats if options.repeats is not None else base.repeats
    quorum = options.quorum if options.quorum is not None else (
        base.quorum if options.repeats is None else repeats // 2 + 1)
    verdict = options.verdict or base.verdict or run.verdict
    if verdict == "sequential" and not run.early_stop:
        raise ValueError("--no-early-stop ([run] early_stop = false) runs every repeat, and the sequential verdict "
                         "stops each case once it decides: use one or the other (--verdict quorum)")
    try:
        tier = TierSettings.model_validate({"repeats": repeats, "quorum": quorum,
                                            "baseline": baseline_of(settings, options), "verdict": verdict})
    except ValidationError:
        source = "--repeats" if options.repeats is not None else f"[tiers.{options.tier}] repeats"
        if options.quorum is None or not 1 <= repeats <= MAX_REPEATS or repeats % 2 == 0:
            raise ValueError(f"--repeats {repeats}: N must be odd, from 1 to {MAX_REPEATS:,} (an even N can tie)"
                             ) from None
        raise ValueError(f"--quorum {quorum}: k must be more than half of N and at most N (N = {repeats}, from "
                         f"{source})") from None
    return settings.model_copy(update={"run": run, "listing": listing, "judge": judge}), tier


def baseline_of(settings: Settings, options: Options) -> bool:
    """--baseline, else [tiers.<tier>] baseline, else [run] baseline."""
    if options.baseline is not None:
        return options.baseline
    tier = getattr(settings.tiers, options.tier).baseline
    return tier if tier is not None else settings.run.baseline


def make_host(name: str, library: Library, settings: Settings, credentials: Credentials,
              prices: prices_mod.PriceTable, api_key_for_host: str, run_folder: Path | None = None) -> Host:
    """The host registered as `name` (runner.hosts.registry). `run_folder`: the run this host serves,
    whose lock this process holds (RunDir.claim); a host that keeps folders keeps them under it."""
    return host_registry.make_host(name, host_registry.HostInputs(
        library=library, settings=settings, prices=prices, api_key=api_key_for_host,
        base_url=credentials.base_url, run_folder=run_folder))


async def audit_surface(host: Host, library: Library, model: str) -> Surface:
    names = set(library.skills)
    invocable = {name for name, skill in library.skills.items() if not skill.manual_only}
    return await host.surface(model, names, invocable)


@dataclass
class Prepared:
    plan: Plan
    plan_hash: str
    cases: dict[str, Case]
    host: Host
    unknown_skills: list[str]
    known_names: dict[str, str]
    judge: Grader | None = None  # a Judge; a BatchJudge in a batched run (runner.execute.batch)
    shard: tuple[int, int] | None = None
    selection: Selection | None = None
    probes: dict[str, Probe] = field(default_factory=dict)
    # Why this process starts no session although the plan could run (a resume without a key: no-credentials); the
    # attempts that finished before keep their results, the others are UNRUN for it.
    idle: str | None = None
    cache: CacheUse | None = None  # the result cache of a new run (runner.cache)


@dataclass
class CacheUse:
    """A run's result cache: the folder, the digests of the library's folders, and what the plan took from it."""

    store: Store
    library: Library
    label: str = ""
    keys: dict[str, str] = field(default_factory=dict)  # every runnable case's key
    hits: dict[str, reuse_mod.Hit] = field(default_factory=dict)  # the cases taken from it
    surface: str = ""  # "reused" / "stored": what became of the surface audit; "" without one
    why_not: str | None = None  # why the plan took nothing from it (said with the plan)

    @cached_property
    def folders(self) -> Folders:
        """Every skill folder's digest: read once, and only when a key is made (a CLI whose version is not known
        makes none; on Aegis the read is ~0.5 s)."""
        return Folders.of(self.library, bounded.OPTION_FILE_MAX_BYTES)


def cache_folder(settings: Settings, options: Options, library: Library) -> Path | None:
    """The result cache's folder: --cache, else [run] cache (relative to the repository); None with --no-cache."""
    if options.no_cache:
        return None
    if options.cache is not None:
        return options.cache
    return Path(library.root) / settings.run.cache if settings.run.cache else None


def cached_previous(settings: Settings, options: Options, library: Library) -> Path | None:
    """--tier pr without --previous: the result cache's last routing matrix, whose confusions the selection then
    follows (in the action, the base branch's; runner.cache.folder.Store.put_routing). None when there is none,
    and when it cannot be read (said on stderr: the pull request is then selected without it)."""
    if options.tier != "pr" or options.previous is not None or options.batch:
        return None
    folder = cache_folder(settings, options, library)
    path = folder / LAST_ROUTING if folder is not None else None
    if path is None or not path.is_file():
        return None
    try:
        confusions.read(path)
    except confusions.ConfusionsError as exc:
        print(f"skill-evals: cache: {exc}; no confusion is followed", file=sys.stderr)
        return None
    return path


def open_cache(settings: Settings, options: Options, library: Library) -> CacheUse | None:
    """The result cache this run uses: --cache, else [run] cache (relative to the repository); none with
    --no-cache, for a batched run (its records are another run folder's rounds) or when neither names one."""
    folder = cache_folder(settings, options, library)
    if folder is None:
        return None
    if options.batch:
        print(f"skill-evals: the result cache {folder} is not used by a batched run (its attempts are rounds of "
              "batches); every case runs", file=sys.stderr)
        return None
    store = Store(folder, max_bytes=settings.run.cache_max_mb * 1_048_576, writable=not options.cache_read_only)
    try:
        store.open()
    except OSError as exc:
        raise ValueError(f"the result cache {folder} cannot be used: {exc.strerror or exc}") from None
    return CacheUse(store=store, library=library, label=options.cache_label)


def surface_for(cache: CacheUse | None, host: Host, library: Library, settings: Settings, versions: dict[str, str]
                ) -> Surface:
    """The surface audit, or its result for the same inputs from the cache (the CLI's version, the settings that
    reach it, every skill's listing inputs)."""
    if cache is not None and "unknown" in versions.values():
        cache = None  # a capture of a CLI whose version is not known must not stand for another's
    key = surface_key(settings.run.host, versions, settings.run.model, settings.listing.budget_chars,
                      settings.run.allowed_tools, library, cache.folders) if cache is not None else ""
    if cache is not None and (found := cache.store.get_surface(key)) is not None:
        cache.surface = "reused"
        return found
    surface = asyncio.run(audit_surface(host, library, settings.run.model))
    if cache is not None and cache.store.writable and surface.error is None:
        cache.store.put_surface(key, surface)
        cache.surface = "stored"
    return surface


def cache_reuse(cache: CacheUse, library: Library, settings: Settings, versions: dict[str, str],
                surface: Surface | None, judge: Judge | None) -> planner.Reuse | None:
    """What the planner asks the cache: the hits among the planned cases (kept in `cache` for the run)."""
    unknown = sorted(name for name, version in versions.items() if version == "unknown")
    if unknown:
        cache.why_not = f"the version of {', '.join(unknown)} is not known, so no entry can be matched to it"
        return None
    context = RunContext(
        host=settings.run.host, versions=versions, model=settings.run.model, max_turns=settings.run.max_turns,
        timeout_s=settings.run.timeout_s, max_output_tokens=settings.run.max_output_tokens,
        allowed_tools=tuple(settings.run.allowed_tools), decide_early=settings.run.decide_early,
        listing=listing_of(library, surface), listing_budget_chars=settings.listing.budget_chars,
        judge=(judge.settings.model, judge.version) if judge is not None else None, folders=cache.folders)
    policy = make_policy([Path(library.root)], Path(library.root), bounded.OPTION_FILE_MAX_BYTES)

    def reuse(planned: list[PlannedCase], rules: RuleOf) -> dict[str, CachedFrom]:
        cache.keys, cache.hits = reuse_mod.lookup(cache.store, context, library, planned, rules, policy)
        return {uid: hit.cached_from() for uid, hit in cache.hits.items()}

    return reuse


def make_judge(settings: Settings, credentials: Credentials, prices: prices_mod.PriceTable, root: Path
               ) -> tuple[Judge | None, str | None]:
    """The judge, or why prose assertions will stay UNRUN."""
    view = JudgeSettingsView(model=settings.judge.model, timeout_s=settings.judge.timeout_s,
                             max_tokens=settings.judge.max_tokens, max_retries=settings.judge.max_retries)
    if not settings.judge.enabled:
        return None, "judge-disabled"
    if not credentials.api_key:
        return None, "no-credentials"
    if settings.judge.require_calibration and not agreement.passing_record(root, settings.judge.model,
                                                                               prompt_version()):
        return None, "judge-not-calibrated"
    return Judge(view, credentials.api_key, credentials.base_url, prices), None


def prepare(library: Library, settings: Settings, options: Options, credentials: Credentials, audit: bool,
            floor: FloorGate | None = None, rundir: RunDir | None = None) -> Prepared:
    """Select, audit the surface (no spend, no key), and plan. Writes nothing but, with `rundir` (the folder
    `run` will write to), its lock (`claim`: a second process on it is refused, RunFolderBusy) and the cut of a
    torn tail a killed earlier run left there. `floor` holds back the cases the floor's errors are about (`plan`
    and `run` pass the same gate, so they plan the same cases)."""
    settings, tier = apply_options(settings, options)
    model_of_another_api_refused(settings)
    hosts_key = credentials.for_host(settings.run.host)  # the judge keeps the Anthropic key (make_judge)
    unrun_all = "kill-switch" if kill_switch(settings, os.environ) else (
        "no-credentials" if not hosts_key.api_key else None)
    whole = {case.uid: case for case in library.cases}
    if options.routing:  # every stage from here on sees the sweep's copies: activation parts only
        library = sweep.measured_library(library)
    by_uid = {case.uid: case for case in library.cases}
    if options.selection_file is not None:
        selection = read_selection(options.selection_file, by_uid)
        if options.routing and (others := [c.uid for c in selection.cases if not is_routing(by_uid[c.uid])]):
            # A sweep measures activation parts; a probe (or any case that is no routing case) is not one.
            raise ValueError(f"{options.selection_file}: a routing sweep runs routing cases only, and this selection "
                             f"holds {len(others)} that are not ({', '.join(others[:5])}); make it with "
                             "`skill-evals select --routing`")
    else:
        selection = select_configured(library, settings.select, options.tier, base=options.base, head=options.head,
                                      period=options.period, skills=options.skills, cases=options.cases,
                                      neighbours=options.neighbours,
                                      previous=options.previous or cached_previous(settings, options, library),
                                      routing=options.routing)
    selected, unknown = [(by_uid[c.uid], c.why) for c in selection.cases], selection.unknown_skills
    prices = prices_mod.load(settings)
    if unrun_all is None:
        unpriced_model_refused(settings, prices)
    # Claimed before the host exists (it empties the run folder's session parent) and before the audit runs.
    # A selection naming unknown skills is refused by `run` anyway: no folder is made for it.
    run_folder = claim(rundir) if rundir is not None and not unknown else None
    if rundir is not None and run_folder is not None:
        reconcile_killed(rundir, folder_plan(rundir))
    host = make_host(settings.run.host, library, settings, hosts_key, prices, hosts_key.api_key or "", run_folder)
    cache = open_cache(settings, options, library)
    versions = host.versions()
    surface = None
    if audit and unrun_all != "kill-switch":
        surface = surface_for(cache, host, library, settings, versions)
    judge, judge_unavailable = make_judge(settings, credentials, prices, Path(library.root))
    reuse = None
    if cache is not None and unrun_all is None:
        reuse = cache_reuse(cache, library, settings, versions, surface, judge)
    elif cache is not None:
        cache.why_not = f"no session would start ({unrun_all})"
    plan = planner.build(library, selected, settings, options.tier, tier, settings.run.host, versions,
                          prices, surface, unrun_all, judge_unavailable,
                          quarantine_mod.load(Path(library.root), path=options.quarantine_file),
                          probe_gates(library), batch=options.batch, floor=floor,
                          session_path=host.session_path, session_wall=host.session_wall,
                          runs_folder=rundir.path.parent if rundir is not None else Path("runs"), reuse=reuse,
                          routing_sweep=sweep.record(whole[case.uid] for case, _ in selected)
                          if options.routing else None)
    return Prepared(plan=plan, plan_hash=plan.digest(), cases={c.uid: c for c in library.cases}, host=host,
                    unknown_skills=unknown, known_names=known_names(library), judge=judge, shard=options.shard,
                    selection=selection, probes={p.uid: p for p in library.probes}, cache=cache)


# Anthropic's model names: what a host of another API (Gemini CLI, Codex) cannot be asked for.
ANTHROPIC_MODEL_PREFIX = "claude-"


def model_of_another_api_refused(settings: Settings) -> None:
    """A host that reaches its model through another API than Anthropic's, planned with an Anthropic model (the
    run's `model`, given no `[run] host_models` entry for it): every session would be an API error, so the plan is
    refused before anything starts."""
    host = settings.run.host
    api = traits(host).api
    if api != ANTHROPIC and settings.run.model.startswith(ANTHROPIC_MODEL_PREFIX):
        raise ValueError(f"the {host} host reaches its model through the {api} API, and its model would be "
                         f"{settings.run.model!r}, an Anthropic model: name its own in [run] host_models "
                         f'(e.g. host_models = {{ {host} = "..." }}) or give --model')


def unpriced_model_refused(settings: Settings, prices: prices_mod.PriceTable) -> None:
    """A model the price table does not know would cost nothing in the ledger: its sessions would reserve $0
    and the cap would limit none of them. So a plan that would start sessions (a key, no kill switch) refuses it,
    naming the way out (ValueError: a usage error of `plan` and `run`)."""
    wanted = [("model", settings.run.model)] + ([("judge model", settings.judge.model)]
                                                if settings.judge.enabled else [])
    for what, model in wanted:
        if prices.price(model) is None:
            raise ValueError(f"the {what} {model!r} has no price in the price table (read on {prices.read_on}), so "
                             f"the cap could not limit its spend; add [prices.\"{model}\"] with input and output "
                             f"(USD per million tokens) to the settings, or choose a priced model: "
                             f"{', '.join(sorted(prices.models))}")


def probe_gates(library: Library) -> dict[str, ProbeGate]:
    """Each probe's calibration state: only a finished record of its current content lets it run."""
    gates = {}
    for probe in library.probes:
        status = probe_calibration.status(library, probe)
        gates[probe.uid] = ProbeGate(state=status.state, verdict=status.verdict,
                                              content_hash=probe.content_hash)
    return gates


def read_selection(path: Path, cases: dict[str, Case]) -> Selection:
    """A selection made earlier (by `skill-evals select`, e.g. outside a container, where git runs)."""
    # Checked once by the option (runner.cli.options.checked_selection); read again within the same bounds, since
    # the path may name something else by now.
    selection = modelfile.read(path, Selection, "a selection written by `skill-evals select`",
                               bounded.OPTION_FILE_MAX_BYTES)
    unknown = [c.uid for c in selection.cases if c.uid not in cases]
    if unknown:
        raise ValueError(f"{path}: the selection names cases this library does not have: {', '.join(unknown[:5])}")
    return selection


def known_names(library: Library) -> dict[str, str]:
    """Every name the library answers to -> its canonical name (runner.corpus.library.Library.names)."""
    return library.names()


class ResumeError(UsageError):
    """The run folder cannot be resumed against this library (a usage error)."""


def prepare_resume(rundir: RunDir, library: Library, settings: Settings, credentials: Credentials,
                   max_usd: float | None = None) -> Prepared:
    """The plan of an earlier run, unchanged but for the cap; refuses when the library is no longer the same.

    `max_usd`, when given, is the cap of the whole run folder from now on: the spend its finished attempts
    already recorded counts against it (the ledger records it before the first start), so the run never spends
    more in total than the number the user gave for this resume — lower than the plan's (stop earlier) or higher
    (the user's consent to finish a run the plan's cap stopped; nothing already paid is paid again). Nothing a
    verdict depends on changes, so the plan keeps its hash: every attempt, old and new, is of one plan. plan.json
    is not rewritten; results.json shows the cap applied (plan.cap_usd, spend.cap_usd)."""
    if not (rundir.path / PLAN).exists():
        raise ResumeError(f"{rundir.path}: no {PLAN} to resume")
    plan = load_plan(rundir)
    planned_hash = plan.digest()
    if max_usd is not None:
        plan = plan.model_copy(update={"cap_usd": max_usd})
    if plan.library.content_hash != library.content_hash:
        raise ResumeError(f"{rundir.path}: the library changed since this run was planned (content hash "
                          f"{plan.library.content_hash[:12]} then, {library.content_hash[:12]} now); start a new run")
    if plan.record_mac is not None:
        rundir.load_key()  # before anything is appended (and before claim completes a whole last record)
    cases = sweep.applied(plan, {c.uid: c for c in library.cases})  # a sweep's copies again, as planned
    shard = None
    if (rundir.path / SHARD).exists():
        raw = json.loads(rundir.read_text(SHARD))
        shard = (int(raw["index"]), int(raw["count"]))
    missing = [c.uid for c in plan.cases if c.uid not in cases]
    if missing:
        raise ResumeError(f"{rundir.path}: planned cases are missing from the library: {', '.join(missing[:5])}")
    run = settings.run.model_copy(update={"host": plan.host, "model": plan.model, "allowed_tools": plan.allowed_tools})
    listing = settings.listing.model_copy(update={"budget_chars": plan.listing_budget_chars})
    settings = settings.model_copy(update={"run": run, "listing": listing})
    prices = prices_mod.load(settings)
    hosts_key = credentials.for_host(plan.host)
    plan, idle, late_judge = keyed_plan(plan, settings, hosts_key, prices)
    folder = claim(rundir)
    reconcile_killed(rundir, plan)
    host = make_host(plan.host, library, settings, hosts_key, prices, hosts_key.api_key or "", folder)
    # The plan decided whether there is a judge: a run planned without one resumes without one (but for a plan made
    # without a key, which could not have one: late_judge).
    judge_settings = settings.judge.model_copy(update={"model": plan.judge_model or settings.judge.model,
                                                       "enabled": plan.judge_model is not None or late_judge})
    judge, unavailable = make_judge(settings.model_copy(update={"judge": judge_settings}), credentials, prices,
                                    Path(library.root))
    if late_judge:
        plan = plan.model_copy(update={"judge_model": judge.settings.model if judge else None,
                                       "judge_prompt_version": judge.version if judge else None,
                                       "judge_unavailable": unavailable})
    elif judge is not None and judge.version != plan.judge_prompt_version:
        raise ResumeError(f"{rundir.path}: the judge prompt changed since this run was planned "
                          f"({plan.judge_prompt_version} then, {judge.version} now); start a new run")
    return Prepared(plan=plan, plan_hash=planned_hash, cases=cases, host=host, unknown_skills=[],
                    known_names=known_names(library), judge=judge if idle is None else None, shard=shard,
                    probes={p.uid: p for p in library.probes}, idle=idle)


def keyed_plan(plan: Plan, settings: Settings, credentials: Credentials, prices: prices_mod.PriceTable
               ) -> tuple[Plan, str | None, bool]:
    """A resumed plan as the key of this process allows: (the plan, why nothing starts now, whether it may have the
    judge it could not have when it was planned).

    Planned without a key (unrun_all no-credentials) and resumed with one: it runs now (the README's path: run, read
    "Set ANTHROPIC_API_KEY", set it, --resume), its model priced as any run's must be, and with the judge the
    settings give. Resumed without a key: nothing starts, and the attempts that finished keep their results (only
    those not run yet are UNRUN no-credentials). The plan's hash stays the planned one either way."""
    if plan.unrun_all == "no-credentials" and credentials.api_key:
        unpriced_model_refused(settings, prices)
        return (plan.model_copy(update={"unrun_all": None}), None,
                plan.judge_unavailable == "no-credentials" and settings.judge.enabled)
    if plan.unrun_all is None and not credentials.api_key:
        return plan, "no-credentials", False
    return plan, None, False


SHARD = "shard.json"


def write_plan(rundir: RunDir, prepared: Prepared) -> None:
    """plan.json, and the folder's key when the plan signs its records (every record appended from now on is)."""
    rundir.create()
    if prepared.plan.record_mac is not None:
        rundir.make_key()
    rundir.write_json(PLAN, prepared.plan.model_dump_json(indent=2))
    if prepared.shard:
        rundir.write_json(SHARD, json.dumps({"index": prepared.shard[0], "count": prepared.shard[1]}))
    if prepared.plan.surface is not None:
        rundir.write_json(SURFACE, prepared.plan.surface.model_dump_json(indent=2))


def load_plan(rundir: RunDir) -> Plan:
    return Plan.model_validate_json(rundir.read_text(PLAN))


def claim(rundir: RunDir) -> Path:
    """Lock the run folder for this process and cut torn tails, saying each cut on stderr (a user watching
    the run sees it as it happens; results.json lists every cut of the folder). Returns the folder."""
    for repair in rundir.claim():
        print(f"skill-evals: {rundir.path}: {repair.describe()}", file=sys.stderr)
    return rundir.path


REFUSED_SHOWN = 20  # refused records said one per line on stderr; the rest are counted (results.json has all)


def prior_attempts(rundir: RunDir, plan: Plan, plan_hash: str, mine: set[str] | None = None
                   ) -> tuple[dict[str, list[AttemptRecord]], list[RefusedRecord]]:
    """Finished accepted attempts of the same plan (cancelled ones are started again on resume), and the records
    refused (runner.results.vetting): they count for nothing, so what they claim runs unless an accepted record
    covers it."""
    vetted = vetting.read(rundir, plan, plan_hash, mine=mine, slim=True)
    return vetted.finished_by_uid(), vetted.refused


def say_refused(rundir: RunDir, refused: list[RefusedRecord]) -> None:
    """One stderr line per refused record (the first REFUSED_SHOWN), then how many more."""
    if not refused:
        return
    print(f"skill-evals: {rundir.path}: {vetting.summary(refused)} record(s) of the attempt log refused (not written "
          f"by the runner, or not for this plan): they count for nothing and their cases are ERROR", file=sys.stderr)
    for record in refused[:REFUSED_SHOWN]:
        print(f"skill-evals:   refused {record.describe()}", file=sys.stderr)
    if len(refused) > REFUSED_SHOWN:
        print(f"skill-evals:   ... and {len(refused) - REFUSED_SHOWN} more (results.json `refused_records`)",
              file=sys.stderr)


def lost_in_flight(rundir: RunDir, plan_hash: str, prior: dict[str, list[AttemptRecord]],
                   cancelled: list[AttemptRecord] | None = None) -> LostInFlight:
    """What the reservation journal says this plan spent beyond what the records show (runner.execute.budget).

    Records that name a reservation are in the journal too (settled at their cost; a cancelled record at what it
    spent before it was cancelled), so the journal's total minus theirs is the spend no record shows: reservations
    in flight at a kill, at their worst case or at the figure a later process reconciled them to, and sessions whose
    record was lost, at their real cost. `prior`: the finished records of the plan (prior_attempts); `cancelled`:
    its accepted cancelled records (vetting.Vetted.cancelled)."""
    totals = journal_totals(rundir.path / RESERVATIONS, plan_hash)
    journaled = sum(r.total_cost_usd for records in prior.values() for r in records if r.reservation_id)
    journaled += sum(r.total_cost_usd for r in cancelled or [] if r.reservation_id)
    return LostInFlight(usd=max(0.0, totals.usd - journaled), reservations=totals.unsettled,
                        attempts=totals.unsettled_for, reconciled=tuple(
                            ReconciledSpend(reservation=r.id, attempt=r.label, reserved_usd=round(r.reserved_usd, 6),
                                            usd=round(r.usd, 6), source=r.source, detail=r.detail)
                            for r in totals.reconciled))


def reconcile_killed(rundir: RunDir, plan: Plan | None) -> list[Reconciled]:
    """Reconcile the reservations a killed process of the run folder left unsettled (runner.execute.reconcile), each
    said on stderr. Holding the folder's lock, before the host exists (it empties the killed sessions' folders)."""
    accepted = vetting.read(rundir, plan, plan.digest(), slim=True).accepted if plan is not None else []
    done = reconcile_mod.reconcile(rundir, plan, accepted)
    for found in done:
        what = f"attempt {found.label}" if found.label else "a judge call"
        print(f"skill-evals: {rundir.path}: reservation {found.id} ({what}) was in flight when an earlier process "
              f"was killed: reconciled from {found.source} at ${found.usd:.4f} (its worst case ${found.reserved_usd:.4f}"
              f"{'' if found.source != 'none' else '; no evidence, so it stays there'})", file=sys.stderr)
    return done


def folder_plan(rundir: RunDir) -> Plan | None:
    """The run folder's plan.json, when there is a readable one (an earlier run's)."""
    try:
        return load_plan(rundir) if (rundir.path / PLAN).exists() else None
    except (OSError, ValueError):
        return None


def open_ledger(rundir: RunDir, plan: Plan, plan_hash: str, mine: set[str] | None = None
                ) -> tuple[dict[str, list[AttemptRecord]], Ledger]:
    """The finished attempts of the plan, and a ledger that journals to the run folder and starts from all
    spend of earlier processes: recorded, and lost in flight at a kill (counted against the same cap). A refused
    record's cost is not in the records' sum; the journal still shows what its session (if any) cost."""
    vetted = vetting.read(rundir, plan, plan_hash, mine=mine, slim=True)  # the log read once, for all below
    prior, cancelled_records = vetted.finished_by_uid(), vetted.cancelled()
    say_refused(rundir, vetted.refused)
    lost = lost_in_flight(rundir, plan_hash, prior, cancelled_records)
    if lost.usd > 0:
        reconciled = f", {len(lost.reconciled)} reconciled with the evidence it left" if lost.reconciled else ""
        print(f"skill-evals: {rundir.path}: ${lost.usd:.4f} of spend no attempt record shows ({lost.reservations} "
              f"reservation(s) in flight when an earlier process of this run was killed, at their worst case"
              f"{reconciled}); counted against the cap", file=sys.stderr)
    rundir.repair_tail(RESERVATIONS)
    journal = Journal(plan_hash, lambda line, durable: rundir.append_line(RESERVATIONS, line, durable))
    ledger = Ledger(cap_usd=plan.cap_usd, journal=journal)
    cancelled = sum(r.total_cost_usd for r in cancelled_records)
    ledger.record_prior(sum(r.total_cost_usd for records in prior.values() for r in records) + cancelled + lost.usd)
    return prior, ledger


def execute(prepared: Prepared, rundir: RunDir, progress: Any = None, dispatch: Dispatch | None = None
            ) -> results_mod.Results:
    """Run the plan; on SIGINT/SIGTERM stop starting, cancel in-flight sessions, write results. `dispatch`: how
    the starts go (runner.execute.executor; batched rounds for `--batch`, runner.pipeline.batched.execute_batched)."""
    plan = prepared.plan
    if prepared.cache is not None and prepared.cache.hits:
        mine = shard_uids(plan, prepared.shard)
        reuse_mod.seed(rundir, prepared.plan_hash, {uid: hit for uid, hit in prepared.cache.hits.items() if uid in mine})
    prior, ledger = open_ledger(rundir, plan, prepared.plan_hash, shard_uids(plan, prepared.shard))
    state = RunState(ledger=ledger)
    executor = Executor(plan, prepared.plan_hash, prepared.cases, prepared.host, rundir, state,
                        prepared.known_names, progress, prepared.judge, plan.judge_unavailable,
                        mine=shard_uids(plan, prepared.shard), probes=prepared.probes, dispatch=dispatch)

    async def main() -> None:
        try:
            await until_signalled(asyncio.ensure_future(executor.run(prior)), lambda: state.stop(STOP_CANCELLED))
        finally:
            if prepared.judge is not None:
                await prepared.judge.aclose()
            await prepared.host.aclose()  # what the host keeps open for the run is closed in this loop

    if plan.unrun_all is None and prepared.idle is None:
        asyncio.run(main())
    return finish(prepared, rundir, prepared.idle or state.stop_reason, ledger.refused)


def shard_uids(plan: Plan, shard: tuple[int, int] | None) -> set[str]:
    return {case.uid for position, case in enumerate(plan.cases) if in_shard(position, shard)}


def finish(prepared: Prepared, rundir: RunDir, stop_reason: str | None, refused: int = 0) -> results_mod.Results:
    # Slim records: results need outcomes and costs, not the answers and tool calls (they stay on disk). Only the
    # records the vetting accepts count; the refused ones are listed and make their cases ERROR.
    mine = shard_uids(prepared.plan, prepared.shard)
    vetted = vetting.read(rundir, prepared.plan, prepared.plan_hash, mine=mine, slim=True)
    results = results_mod.build(prepared.plan, prepared.plan_hash, prepared.cases, vetted.accepted, stop_reason,
                                refused, mine, prepared.shard,
                                lost=lost_in_flight(rundir, prepared.plan_hash, vetted.finished_by_uid(),
                                                    vetted.cancelled()),
                                repairs=rundir.repairs(), refused_records=vetted.refused)
    rundir.write_json(RESULTS, results.model_dump_json(indent=2))
    if prepared.cache is not None:
        store_in_cache(prepared, prepared.cache, rundir, results, mine)
    return results


def store_in_cache(prepared: Prepared, cache: CacheUse, rundir: RunDir, results: results_mod.Results,
                   mine: set[str]) -> None:
    """Add what this run decided to the cache (runner.cache.reuse.entries), keep the folder within its bound, and
    say on stderr what could not be read or written."""
    if cache.store.writable and cache.keys:
        records = vetting.read(rundir, prepared.plan, prepared.plan_hash, mine=mine).accepted
        origin = reuse_mod.origin_of(rundir, prepared.plan_hash, results.finished_at, cache.label)
        made = reuse_mod.entries([p for p in prepared.plan.cases if p.uid in mine], cache.keys, records,
                                 prepared.cases, cache.folders, origin,
                                 rundir, prepared.plan.early_rule)
        for entry in made:
            cache.store.put(entry)
        cache.store.evict()
    if results.routing is not None:  # writable stores only (put_routing): what the next pull request follows
        cache.store.put_routing(results.routing.model_dump(mode="json"), cache.label)
    for note in cache.store.notes:
        print(f"skill-evals: cache: {note}", file=sys.stderr)


def floor_errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.level.value == "error"]


def is_terminal() -> bool:
    return sys.stderr.isatty() and not os.environ.get("CI")
