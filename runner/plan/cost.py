"""The cost model: a plan's worst case and expected spend, from the first request, the cache layout and prices.

The worst case (what a session reserves) assumes no cache and every turn at its largest. The expected cost follows
the host's cache layout as the surface audit measured it, else an estimate (`token_basis` says which).

Design notes: docs/design/rate-limits-and-spend.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from runner.core.host_traits import HOST_TRAITS, HostTraits, traits
from runner.core.quorum import VerdictRule
from runner.core.sequential import SequentialRule, expected_attempts
from runner.corpus import bounded, decide
from runner.corpus.files import path_problem
from runner.corpus.library import Case, Library
from runner.corpus.settings import CostSettings, Price, Settings
from runner.hosts import listing as listing_mod
from runner.hosts.surface import KNOWN_REQUESTS, LISTING_HEADER, CacheLayout, Surface
from runner.plan.plan import CostEstimate, HostEstimate, KindBasis, KindEstimate, PlannedCase

SessionKind = Literal["cold", "first", "repeat"]

# Claude Code's Read tool returns at most about 25,000 tokens of a file; a skill body or a
# reference read is bounded by it. The worst case of a session assumes every turn adds that much.
MAX_TOOL_RESULT_TOKENS = 25_000
CHARS_PER_TOKEN = 4  # the same rule of thumb Claude Code uses for its listing budget


@dataclass(frozen=True)
class FirstRequest:
    """A session's first request without its case prompt: measured by the surface audit, or else modelled."""

    chars: int
    shared_chars: int  # the prefix every session shares, marked for the cache (0 when nothing is)
    layout: CacheLayout
    basis: str  # where `chars` came from, in words (CostEstimate.token_basis)


def first_request(library: Library, settings: Settings, host: str, surface: Surface | None,
                  versions: dict[str, str] | None = None) -> FirstRequest:
    """The surface audit's captured request when there is one. Without it (`plan --no-surface`, the kill switch),
    an estimate: the census's model of the listing this library gets (runner.hosts.listing, the same rule the audit is
    checked against) plus what the host sends besides it — Claude Code's system prompt, tools and context as the
    audit measured them once (runner.hosts.surface.KNOWN_REQUESTS), the api host's own prompt and tools — with the
    host's known cache layout."""
    if surface is not None and surface.request_chars:
        layout: CacheLayout = surface.cache_layout if not surface.error else "none"
        return FirstRequest(surface.request_chars, surface.cached_prefix_chars if layout != "none" else 0, layout,
                            f"the surface audit's captured first request ({surface.request_chars:,} characters) / "
                            f"{CHARS_PER_TOKEN}")
    allowed = settings.run.allowed_tools
    # The first-turn host sends Claude Code's own first request: its request model is the claude-code host's.
    model = traits(host).request_model
    known = KNOWN_REQUESTS.get(model) if model is not None else None
    if known is not None:
        shown = listing_mod.estimate(library, settings.listing, host)
        entries = shown.listed + len(shown.host_entries)
        chars = known.request_chars(allowed, shown.estimated_listing_chars, entries)
        _, unmeasured = known.tools(allowed)
        running = (versions or {}).get("claude-code-cli")
        caveats = [f"tools {', '.join(unmeasured)} not measured (counted at the mean tool)"] if unmeasured else []
        if running and running != known.cli_version:
            caveats.append(f"this host runs CLI {running}")
        return FirstRequest(chars, known.cached_prefix_chars(allowed), known.cache_layout, (
            f"an estimate, no surface audit: Claude Code {known.cli_version}'s first request as measured "
            f"{known.measured_on} without its listing ({chars - shown.estimated_listing_chars:,} characters: system "
            f"prompt, tools, context) plus the census's model of this library's listing "
            f"({shown.estimated_listing_chars:,} characters), / {CHARS_PER_TOKEN}"
            + (f" ({'; '.join(caveats)})" if caveats else "")))
    if model == "api-prompt":
        from runner.hosts import api as api_host  # the approximation's own prompt and tools (imports the SDK)

        shown = listing_mod.estimate(library, settings.listing, host)
        system = len(api_host.BASE_PROMPT) + 2 + len(LISTING_HEADER) + shown.estimated_listing_chars
        chars = system + api_host.TOOLS_CHARS
        cached = chars // CHARS_PER_TOKEN >= api_host.CACHE_MIN_TOKENS
        # Marked, the system is a JSON block: its newlines escaped (one a listed skill) and the block around it.
        marked = system + shown.listed + api_host.BASE_PROMPT.count("\n") + len(json.dumps(
            [{"type": "text", "text": "", "cache_control": api_host.EPHEMERAL}])) + api_host.TOOLS_CHARS
        return FirstRequest(chars, marked if cached else 0, "prefix" if cached else "none", (
            f"an estimate, no surface audit: the api host's prompt and tools ({chars - shown.estimated_listing_chars:,}"
            f" characters) plus its listing of this library ({shown.estimated_listing_chars:,} characters), / "
            f"{CHARS_PER_TOKEN}"))
    listing = sum(len(s.name) + len(s.description or "") + 4 for s in library.skills.values() if not s.manual_only)
    return FirstRequest(listing, 0, "none", (
        f"an estimate, no surface audit: the skill listing ({listing:,} characters) / {CHARS_PER_TOKEN}; the "
        f"{host} host's own system prompt and tools are not known, so not counted"))


def request_tokens(request: FirstRequest, prompt_chars: int) -> int:
    """A first turn's input tokens: the request and the case prompt, 4 characters a token."""
    return (request.chars + prompt_chars) // CHARS_PER_TOKEN


def first_turn_tokens(library: Library, surface: Surface | None, prompt_chars: int) -> tuple[int, str]:
    """The listing-only count of a first turn without a surface audit (what `calibrate` bounds a probe session by;
    the plan uses `first_request`, which models the host's whole request)."""
    if surface is not None and surface.request_chars:
        return (surface.request_chars + prompt_chars) // CHARS_PER_TOKEN, (
            f"the surface audit's captured first request ({surface.request_chars:,} characters) / {CHARS_PER_TOKEN}")
    listing = sum(len(s.name) + len(s.description or "") + 4 for s in library.skills.values() if not s.manual_only)
    return (listing + prompt_chars) // CHARS_PER_TOKEN, (
        f"the skill listing ({listing:,} characters) / {CHARS_PER_TOKEN}; no surface audit, so the host's own "
        "system prompt and tools are not counted")


def worst_session_usd(first_turn: int, max_turns: int, max_output: int, price_in: float, price_out: float) -> float:
    """The worst case of one session, in USD: every turn at the output bound plus the largest tool result, no
    cache. Turn t re-sends everything before it. (The expected cost is estimate_expected's.)"""
    tokens_in = sum(first_turn + t * (max_output + MAX_TOOL_RESULT_TOKENS) for t in range(max_turns))
    return (tokens_in * price_in + max_turns * max_output * price_out) / 1_000_000


@dataclass(frozen=True)
class SessionShape:
    """One expected session, in tokens: turn t (0-based) sends first_turn + t × growth."""

    first_turn: float
    cached_prefix: float  # the part of the first turn every session shares, marked for the cache
    growth: float
    turns: float
    output_per_turn: float

    @property
    def input_tokens(self) -> float:
        return self.turns * self.first_turn + self.growth * self.turns * (self.turns - 1) / 2


def cache_prices(price: Price) -> tuple[float, float, int]:
    """(write, read, minimum prefix) of a model: the price table's, else 1.25x / 0.1x input and 1,024 tokens."""
    write = price.cache_write if price.cache_write is not None else price.input * 1.25
    read = price.cache_read if price.cache_read is not None else price.input * 0.1
    return write, read, price.cache_min_tokens if price.cache_min_tokens is not None else 1024


def session_usd(shape: SessionShape, layout: CacheLayout, price: Price, which: SessionKind) -> float:
    """One session's expected USD.

    `conversation` (Claude Code): turn 0 reads the shared prefix and writes the rest of its input; a `cold`
    session (the first wave) writes the shared prefix too; a `repeat` (a later session of a case whose first
    turn, head and prompt, an earlier session of the case already sent byte for byte) reads its whole first
    turn. Turn t >= 1 reads turn t-1's whole input and writes the growth. `prefix` (the api host): every turn
    reads the shared prefix (a cold session's first turn writes it), the rest is plain input. A prefix under the
    model's minimum is never cached; `none` caches nothing."""
    write_price, read_price, minimum = cache_prices(price)
    t, first = shape.turns, shape.first_turn
    shared = shape.cached_prefix if shape.cached_prefix >= minimum else 0.0
    total = shape.input_tokens
    read = written = 0.0
    if layout == "conversation" and first >= minimum:
        later = (t - 1) * first + shape.growth * (t - 1) * (t - 2) / 2  # turns 1.. read the turn before
        read = later + {"cold": 0.0, "first": shared, "repeat": first}[which]
        written = total - read
    elif layout == "prefix" and shared:
        read = t * shared - (shared if which == "cold" else 0.0)
        written = shared if which == "cold" else 0.0
    plain = total - read - written
    return (plain * price.input + written * write_price + read * read_price
            + t * shape.output_per_turn * price.output) / 1_000_000


def cold_sessions(sessions: int, concurrency: int, timeout_s: float, ttl_s: float) -> int:
    """Sessions expected to write the shared prefix: the first wave starts before any response could have
    written it; later ones read it, unless sessions may start further apart than the cache lives."""
    if timeout_s / max(1, concurrency) > ttl_s:
        return sessions
    return min(sessions, concurrency)


@dataclass(frozen=True)
class Basis:
    """What a previous run measured: per case kind, and how its token counts compare to the plan's estimate."""

    kinds: dict[str, KindBasis]
    token_scale: float  # measured first-turn input / the plan's chars / 4 for it
    described: str
    # uid -> (wins, losses) the previous run observed: what the sequential verdict expects of a case's rate.
    history: dict[str, tuple[int, int]] = field(default_factory=dict)


def read_basis(path_text: str, root: Path, runs_folder: Path | None = None, host: str = "",
               model: str = "") -> Basis:
    """The figures a previous run measured (its folder or its results.json); empty, with why, when none.
    `auto`: the newest run in `runs_folder` (where this run's folder is made) of the same host and model that
    measured any session (`auto_basis`)."""
    if not path_text:
        return Basis({}, 1.0, "defaults")
    if path_text == "auto":
        found = auto_basis(runs_folder, host, model)
        if found is None:
            where = f"{runs_folder}" if runs_folder is not None else "no runs folder"
            return Basis({}, 1.0, f"defaults (no earlier {host} run of {model} with measured sessions in {where})")
        path = found
    elif problem := path_problem(path_text):  # the settings may come from the repository under review
        return Basis({}, 1.0, f"defaults ([cost] basis is not a usable path: {problem})")
    else:
        path = Path(path_text) if Path(path_text).is_absolute() else root / path_text
    if path.is_dir():
        path = path / "results.json"
    try:
        # [cost] basis may come from the repository under review: a FIFO or /dev/zero is refused unopened.
        data = json.loads(bounded.read_text(path, bounded.RUN_FILE_MAX_BYTES))
        cost = data.get("cost") or {}
        rows = [KindBasis.model_validate(row) for row in cost.get("by_kind", [])]
        scale = float(cost.get("token_scale") or 1.0)
        history = case_history(data.get("cases") or [])
    except (OSError, ValueError, AttributeError, TypeError, RecursionError) as exc:
        return Basis({}, 1.0, f"defaults ([cost] basis {path} could not be read: {str(exc).splitlines()[0][:120]})")
    kinds = {row.kind: row for row in rows if row.sessions > 0}
    if not kinds:
        return Basis({}, 1.0, f"defaults ([cost] basis {path} has no measured sessions)")
    return Basis(kinds, scale if 0.1 <= scale <= 10 else 1.0, f"measured in {path}", history)


def case_history(cases: list[object]) -> dict[str, tuple[int, int]]:
    """uid -> (wins, losses) of each case an earlier run observed (results.json `cases`); a row it cannot read is
    left out, as a case with no history."""
    history: dict[str, tuple[int, int]] = {}
    for row in cases:
        if not isinstance(row, dict):
            continue
        uid, wins, losses = row.get("uid"), row.get("wins"), row.get("losses")
        if isinstance(uid, str) and isinstance(wins, int) and isinstance(losses, int) and wins >= 0 and losses >= 0 \
                and wins + losses > 0:
            history[uid] = (wins, losses)
    return history


def auto_basis(runs_folder: Path | None, host: str, model: str) -> Path | None:
    """The results.json of the newest finished run in `runs_folder` with this host and model and measured
    sessions. A run of another model or host measured other token counts, so it is never used; an unreadable
    folder is passed over (it is not this plan's to judge)."""
    if runs_folder is None or not runs_folder.is_dir():
        return None
    best: tuple[str, Path] | None = None
    for path in runs_folder.glob("*/results.json"):
        try:
            data = json.loads(bounded.read_text(path, bounded.RUN_FILE_MAX_BYTES))
            plan, cost = data.get("plan") or {}, data.get("cost") or {}
            finished = str(data.get("finished_at") or "")
            measured = any(int(row.get("sessions") or 0) > 0 for row in cost.get("by_kind") or [])
        except (OSError, ValueError, AttributeError, TypeError, RecursionError):
            continue
        if plan.get("host") == host and plan.get("model") == model and measured and (best is None or
                                                                                     finished > best[0]):
            best = (finished, path)
    return best[1] if best else None


def default_growth(library: Library, cost: CostSettings) -> int:
    """[cost] growth_tokens_per_turn, else a skill loaded per turn: the mean SKILL.md body / 4 + 100."""
    if cost.growth_tokens_per_turn is not None:
        return cost.growth_tokens_per_turn
    bodies = [len(s.body) for s in library.skills.values() if not s.manual_only]
    return (sum(bodies) // len(bodies) if bodies else 0) // CHARS_PER_TOKEN + 100


def kind_shape(kind: str, basis: Basis, first_turn: float, shared: float, default_turns: int, growth: int,
               output: int) -> tuple[SessionShape, str]:
    """The expected session of a kind: measured when the basis has the kind (token counts scaled as the basis
    run's API counted them), else the defaults."""
    measured = basis.kinds.get(kind)
    scale = basis.token_scale
    if measured is None:
        return SessionShape(first_turn * scale, shared * scale, growth, default_turns, output), "default"
    return (SessionShape(first_turn * scale, shared * scale, max(0.0, measured.growth_tokens_per_turn),
                         max(1.0, measured.turns), measured.output_tokens_per_turn),
            f"measured: {measured.sessions} sessions")


def expected_sessions_per_case(planned: PlannedCase, basis: Basis, rule: VerdictRule | None) -> float:
    """`rule`: the case's early rule (Plan.early_rule). None, every repeat runs: N (probes, fixed N). By the
    sequential verdict, its expected attempts at the rate the previous run observed of the case, else over any rate
    (runner.core.sequential.expected_attempts); by k of N, what the basis measured for the kind, else halfway from k
    (every case decided by its first k) to N."""
    if rule is None:
        return float(planned.repeats)
    if isinstance(rule, SequentialRule):
        return expected_attempts(rule, *basis.history.get(planned.uid, (0, 0)))
    measured = basis.kinds.get(planned.kind)
    if measured is not None and measured.sessions_per_case > 0:
        return min(float(planned.repeats), max(float(planned.quorum), measured.sessions_per_case))
    return (planned.quorum + planned.repeats) / 2


@dataclass(frozen=True)
class Expected:
    by_kind: list[KindEstimate]
    session_usd: float  # the mean expected session, cached
    uncached_session_usd: float
    cold: int
    basis: str
    token_scale: float
    repeats_read: bool
    per_case: dict[str, float] = field(default_factory=dict)  # uid -> its expected sessions (all arms)
    from_history: int = 0  # sequential cases whose expectation is at the rate the previous run observed


def estimate_expected(runnable: list[PlannedCase], library: Library, settings: Settings, price: Price | None,
                      first_turn: float, shared: int, layout: CacheLayout, repeats_read: bool,
                      rules: Mapping[str, VerdictRule | None], runs_folder: Path | None = None) -> Expected:
    """The expected cost of every planned session of the runnable cases (the design notes). `repeats_read`: a
    case's later sessions send its first session's first turn byte for byte (one session path), so they read it.
    `rules`: each case's early rule by uid (Plan.early_rule; None: every repeat runs). `runs_folder`: where
    `[cost] basis = "auto"` looks for the previous run."""
    run, cost = settings.run, settings.cost
    basis = read_basis(cost.basis, Path(library.root), runs_folder, run.host, run.model)
    growth, output = default_growth(library, cost), min(run.max_output_tokens, cost.output_tokens_per_turn)
    sessions_max: dict[str, int] = {}
    cases: dict[str, int] = {}  # cases and arms: each has a first session, which writes the case's first turn
    expected_sessions: dict[str, float] = {}
    by_uid: dict[str, float] = {}
    for planned in runnable:
        sessions_max[planned.kind] = sessions_max.get(planned.kind, 0) + planned.sessions
        arms = max(1, len(planned.arms))
        cases[planned.kind] = cases.get(planned.kind, 0) + arms
        per_arm = expected_sessions_per_case(planned, basis, rules[planned.uid])
        by_uid[planned.uid] = arms * per_arm
        expected_sessions[planned.kind] = expected_sessions.get(planned.kind, 0.0) + arms * per_arm
    per_case = {kind: expected_sessions[kind] / cases[kind] for kind in cases}
    total = sum(expected_sessions.values())
    cold = cold_sessions(round(total), run.concurrency, run.timeout_s, cost.cache_ttl_s)
    repeat_kind: SessionKind = "repeat" if repeats_read and layout == "conversation" else "first"
    rows, expected, uncached = [], 0.0, 0.0
    for kind, count in sorted(expected_sessions.items()):
        shape, source = kind_shape(kind, basis, first_turn, shared, run.expected_turns, growth, output)
        usd = {which: session_usd(shape, layout, price, which) if price else 0.0
               for which in ("cold", "first", "repeat")}
        cold_here = cold * count / total if total else 0.0  # the first wave mixes kinds as the plan does
        first_here = max(0.0, cases[kind] - cold_here)
        repeats_here = max(0.0, count - cold_here - first_here)
        expected += cold_here * usd["cold"] + first_here * usd["first"] + repeats_here * usd[repeat_kind]
        uncached += session_usd(shape, "none", price, "first") * count if price else 0.0
        rows.append(KindEstimate(kind=kind, sessions_max=sessions_max[kind], sessions_per_case=round(per_case[kind], 3),
                                 turns=round(shape.turns, 3),
                                 growth_tokens_per_turn=round(shape.growth),
                                 output_tokens_per_turn=round(shape.output_per_turn), basis=source,
                                 cold_session_usd=round(usd["cold"], 6), first_session_usd=round(usd["first"], 6),
                                 repeat_session_usd=round(usd[repeat_kind], 6)))
    mean = expected / total if total else 0.0
    sequential = [uid for uid, rule in rules.items() if isinstance(rule, SequentialRule)]
    return Expected(rows, mean, uncached / total if total else 0.0, cold, basis.described, basis.token_scale,
                    repeat_kind == "repeat", by_uid, sum(1 for uid in sequential if uid in basis.history))


def first_turn_eligible(planned: PlannedCase, case: Case) -> bool:
    """Whether the first-turn host may send this case's first request itself (the host's own rule)."""
    return decide.first_turn_ineligible(planned.decide_when, [], case.files, case.prompt) is None


def host_estimates(runnable: list[PlannedCase], found: Expected, estimate: CostEstimate,
                   price: Price | None, first_turn: float, shared: int, layout: CacheLayout,
                   decide_early: bool) -> list[HostEstimate]:
    """Every registered host that runs Claude Code (HostTraits.runs_claude_code: claude-code and first-turn), side
    by side: the same sessions, the requests and the expected cost of each. An attempt of a host that sends the
    first request itself (HostTraits.extra_first_request: first-turn) is one request (a first turn that reads the
    shared prefix) unless its reply hands it off, which the plan cannot know: the note says so and the worst case
    reserves a whole session more."""
    sessions = sum(c.sessions for c in runnable)
    kinds = {row.kind: row for row in found.by_kind}
    turns = {c.uid: kinds[c.kind].turns if c.kind in kinds else 1.0 for c in runnable}
    cc_requests = sum(turns[c.uid] * c.sessions for c in runnable)
    decided = [c for c in runnable if c.decide_when]
    eligible = [c for c in runnable if c.first_turn]  # first_turn implies decide_when (first_turn_ineligible)
    one_turn = SessionShape(first_turn * found.token_scale, shared * found.token_scale, 0.0, 1.0,
                            min(kinds[eligible[0].kind].output_tokens_per_turn, 1000) if eligible else 0)
    one_usd = session_usd(one_turn, layout, price, "first") if price else 0.0
    eligible_sessions = sum(c.sessions for c in eligible)
    others = sessions - eligible_sessions
    ft_requests = eligible_sessions + sum(turns[c.uid] * c.sessions for c in runnable if not c.first_turn)

    def per(requests: float) -> float:
        return round(requests / sessions, 3) if sessions else 0.0

    def row(host: str, known: HostTraits) -> HostEstimate:
        if known.extra_first_request:
            return HostEstimate(
                host=host, sessions_max=sessions, requests_per_session=per(ft_requests),
                expected_usd=round(eligible_sessions * one_usd + others * estimate.expected_session_usd, 4),
                decided_cases=len(eligible),
                note=(f"{len(eligible)} activation-only case(s) sent as Claude Code's first request, one request "
                      "each unless the first reply leaves the outcome open (then a Claude Code session runs the "
                      f"attempt too, not in this figure); {len(runnable) - len(eligible)} other case(s) on "
                      "Claude Code"))
        return HostEstimate(host=host, sessions_max=sessions, requests_per_session=per(cc_requests),
                            expected_usd=estimate.expected_usd, decided_cases=len(decided),
                            note=("activation-only sessions end once their outcome is certain" if decide_early
                                  else "every session runs to its end ([run] decide_early = false)")
                            + f"; turns per kind: {found.basis}")

    return [row(host, host_traits) for host, host_traits in HOST_TRAITS.items() if host_traits.runs_claude_code]
