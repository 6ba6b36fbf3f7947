"""The repository's settings file, `.skill-evals.toml`: where the library is, how to classify it.

Every choice the semantics leave open is a setting here, with the default documented in
docs/configuration.md. The file is validated like any eval file: a typo is an error with its line, never
silently ignored (pydantic `extra="forbid"`).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from runner.core.host_traits import DEFAULT_HOST, HostName
from runner.core.kinds import AssertionClass, CaseKind
from runner.corpus import bounded
from runner.corpus.findings import Finding, display_path, error

SETTINGS_FILE = ".skill-evals.toml"

# Claude Code tools that never write a file: only with these alone may sessions share linked files
# (runner.hosts.workspace), and only these may settings from the code under review allow (runner.corpus.trust).
READ_ONLY_TOOLS = frozenset({"Skill", "Read", "Glob", "Grep", "LS", "TodoWrite"})


class _Strict(BaseModel):
    # allow_inf_nan=False: `max_usd = nan` and `timeout_s = inf` are legal TOML, never a cap or a bound.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class LibrarySettings(_Strict):
    roots: list[str] = Field(default=[], description="Folders to read skills from, relative to the repository root: "
                                                     "each a folder of skills (categories allowed) or one skill's "
                                                     "folder. Default: found from the repository's layout.")
    skills: str | None = Field(default=None, description="One skills folder, relative to the repository root (the "
                                                         "same as `roots = [<it>]`).")
    agents: str | None = Field(default=None, description="Subagents folder; default: `agents` beside the skills folder.")
    templates: list[str] = Field(
        default=["_*"],
        description="Glob patterns of skill folders that are templates: listed by the host, but their "
                    "eval cases are examples and are not run.")


class ValidatorSettings(_Strict):
    command: str | None = Field(
        default=None,
        description="The library's own structural validator, run from the repository root before our checks. "
                    "Default: `scripts/validate-skills.py` when that file exists.")
    enabled: bool = True
    timeout_s: float = Field(default=300, gt=0)


class LimitsSettings(_Strict):
    max_file_bytes: int = Field(default=1_048_576, gt=0, description="Larger files are reported and not read.")
    max_probe_lines: int = Field(default=40, gt=0, description="question.md must be shorter than this (seed 000 rule 5).")


# Claude Code's skill listing budget: context tokens x 4 chars per token x 1%
# (skillListingBudgetFraction 0.01 of a 200,000-token window = 8,000 characters), overridable
# with SLASH_COMMAND_TOOL_CHAR_BUDGET; each description is also capped (1,536 characters).
HOST_DEFAULT_LISTING_BUDGET = 8_000


class ListingSettings(_Strict):
    budget_chars: int | None = Field(
        default=None, gt=0,
        description="Sessions get SLASH_COMMAND_TOOL_CHAR_BUDGET=<this>; unset = the host's own default "
                    "(estimated as 8,000 characters by the census).")
    max_description_chars: int = Field(default=1_536, gt=0)

    @property
    def effective_budget(self) -> int:
        return self.budget_chars or HOST_DEFAULT_LISTING_BUDGET


class ClassifySettings(_Strict):
    refusal_id_prefixes: list[str] = ["should-not-", "refusal-"]
    refusal_id_exclude_prefixes: list[str] = ["should-not-trigger-"]
    refusal_types: list[str] = ["should_not_do"]
    halt_id_prefixes: list[str] = Field(
        default=["stop-"],
        description="Ids of halt cases (the skill fires and stops to ask): run as trigger cases, listed in the census.")


# Bounds past any real eval, so that no number turns the plan's arithmetic into a hang or an overflow.
MAX_REPEATS = 1_001
MAX_TURNS = 1_000
MAX_SESSION_S = 86_400.0  # a day


VerdictName = Literal["quorum", "sequential"]


class TierSettings(_Strict):
    repeats: int = Field(default=3, ge=1, le=MAX_REPEATS, description="N, odd.")
    quorum: int = Field(default=2, ge=1, description="k, more than N/2.")
    verdict: VerdictName | None = Field(default=None, description="quorum | sequential for this tier. Empty: [run] "
                                                                    "verdict.")
    baseline: bool | None = Field(default=None, description="Run every output case of this tier with a control arm "
                                                             "too (the same session without the skill under test): "
                                                             "uplift. Empty: [run] baseline.")

    @model_validator(mode="after")
    def _odd_majority(self) -> "TierSettings":
        if self.repeats % 2 == 0:
            raise ValueError(f"repeats must be odd (got {self.repeats}): an even N can tie")
        if not self.repeats / 2 < self.quorum <= self.repeats:
            raise ValueError(f"quorum must be more than half of repeats and at most repeats (got {self.quorum} of "
                             f"{self.repeats})")
        return self


class SequentialSettings(_Strict):
    """The sequential verdict (runner.core.sequential): a sequential probability ratio test on the rate at which a
    case's attempts meet its expectation (a trigger case's skill fires, a no_trigger case's does not)."""

    pass_rate: float = Field(default=0.5, gt=0, lt=1, description="θ: a case passes when that rate is above it.")
    indifference: float = Field(default=0.25, gt=0, lt=0.5,
                                description="δ: the test decides between a rate ≤ θ−δ (FAIL) and ≥ θ+δ (PASS); "
                                            "inside that band either verdict is acceptable, and a case may end "
                                            "undecided.")
    alpha: float = Field(default=0.1, gt=0, lt=0.5, description="The chance of PASS for a case whose rate is θ−δ, "
                                                                "at most (less below it).")
    beta: float = Field(default=0.1, gt=0, lt=0.5, description="The chance of FAIL for a case whose rate is θ+δ, at "
                                                               "most (less above it).")
    max_repeats: int = Field(default=6, ge=1, le=MAX_REPEATS,
                             description="Attempts per case at most, errors included (what the cap reserves); a case "
                                         "still open then is UNDECIDED.")
    round_size: int = Field(default=2, ge=1, le=MAX_REPEATS, description="Attempts of a case started together; the "
                                                                          "rule looks when a round has ended.")

    @model_validator(mode="after")
    def _inside(self) -> "SequentialSettings":
        if not 0 < self.pass_rate - self.indifference < self.pass_rate + self.indifference < 1:
            raise ValueError(f"pass_rate ± indifference must lie inside (0, 1), got {self.pass_rate} ± "
                             f"{self.indifference}")
        return self


class TiersSettings(_Strict):
    pr: TierSettings = TierSettings()
    cadence: TierSettings = TierSettings()
    full: TierSettings = TierSettings()


class SelectSettings(_Strict):
    cadence_fraction: float = Field(
        default=0.25, gt=0, le=1,
        description="The cadence tier runs 1/S of the cases per period, S = ceil(1/cadence_fraction), stratified "
                    "by skill; S consecutive periods run every case exactly once.")
    period: str = Field(
        default="",
        description="The cadence period key (ISO week `2026-W48`, date, month `2026-11` or a number; consecutive "
                    "keys rotate through the slots). Empty: the ISO week of today (UTC).")
    max_full_cases: int = Field(
        default=2000, ge=1,
        description="When a pull request changes the runner's settings, the pr tier selects every case, at most "
                    "this many (changed skills first, then their neighbours, then a round-robin over the rest).")
    settings_paths: list[str] = Field(
        default=[".skill-evals.toml", ".skill-evals/"],
        description="Paths (relative to the repository root; a trailing / names a folder) whose change in a pull "
                    "request selects every case for the pr tier.")


class RunSettings(_Strict):
    host: HostName = DEFAULT_HOST
    model: str = "claude-sonnet-4-6"
    host_models: dict[HostName, str] = Field(
        default={}, description="The model of a host, by host name, instead of `model`: a host whose model is reached "
                                "through another API than Anthropic's (gemini, codex) needs its own, e.g. "
                                '{gemini = "gemini-2.5-pro", codex = "gpt-5-codex"}; `run --host claude-code,gemini` '
                                "then runs each host on its own. Its price must be in the table or [prices].")
    max_turns: int = Field(default=6, ge=1, le=MAX_TURNS)
    timeout_s: float = Field(default=300, gt=0, le=MAX_SESSION_S, description="Wall-clock bound of one session.")
    max_output_tokens: int = Field(default=4096, ge=1, description="Per model call.")
    expected_turns: int = Field(default=2, ge=1, le=MAX_TURNS,
                                description="Turns of a typical session, for the plan's estimate.")
    concurrency: int = Field(default=4, ge=1)
    max_usd: float = Field(default=10.0, ge=0, description="Hard cap on one run's spend (sessions and judge).")
    disabled: bool = Field(default=False, description="Kill switch: every case UNRUN kill-switch, exit 0.")
    allowed_tools: list[str] = Field(default=["Skill", "Read", "Glob", "Grep"],
                                     description="Read-only tools a session may use (Skill must be among them).")
    cli_path: str | None = Field(default=None, description="Another Claude Code CLI than the SDK's bundled one.")
    rate_limit_pause_s: float = Field(default=30.0, ge=0, description="After a session ends rate-limited (429 past "
                                                                      "the client's retries), no session starts for "
                                                                      "this long. A spend-limit 429 stops the run.")
    verdict: VerdictName = Field(default="quorum", description="quorum: k of N repeats ([tiers.<tier>]), stopping "
                                                                "once decided. sequential: rounds of attempts until "
                                                                "a sequential test decides, at most [sequential] "
                                                                "max_repeats, else UNDECIDED. [tiers.<tier>] verdict "
                                                                "overrides it.")
    early_stop: bool = Field(default=True, description="Stop starting a case's repeats once the quorum is decided "
                                                       "(the verdict is the same as with every repeat run); false runs "
                                                       "all N.")
    decide_early: bool = Field(default=True, description="An activation-only case's session ends as soon as its "
                                                        "outcome can no longer change (the target fired, a forbidden "
                                                        "skill fired: runner.corpus.decide); false runs every session "
                                                        "to its end. Cases with assertions about the answer always "
                                                        "run to the end.")
    baseline: bool = Field(default=False, description="Every executed output case (assertions about the answer) "
                                                      "also runs a control arm, the same session without the skill "
                                                      "under test, judged by the same rubric; both arms run every "
                                                      "repeat. results.json shows the uplift. Doubles those cases' "
                                                      "sessions. [tiers.<tier>] baseline overrides it.")
    host_max_retries: int = Field(default=2, ge=0, description="Transport retries of the host's own client "
                                                                "(CLAUDE_CODE_MAX_RETRIES; the anthropic SDK's default "
                                                                "is 2). An error after them is ERROR.")
    session_namespace: Literal["auto", "mount", "user", "case", "off"] = Field(
        default="auto",
        description="claude-code: see every session's own folder at one fixed path, each session in its own mount "
                    "namespace, so the text before the case prompt is the same in every session (a shared prompt "
                    "cache). auto: a mount namespace, else a user namespace, else one path per case whose sessions "
                    "take turns at it (per-case-path: no namespace, e.g. in the action's container; only when no "
                    "session can leave a program running: confined sessions or read-only tools), else a random "
                    "path per session (the fallback); every choice is recorded with why. mount / user: only that "
                    "one, else the fallback; case: per-case-path (else the fallback); off: the fallback.")
    cache: str = Field(default="", description="A result cache folder (runner.cache): a case whose attempts it "
                                               "holds for the same key (the case, what the sessions are shown, the "
                                               "skills they load, host, model, bounds, judge, harness) is taken "
                                               "from it instead of run again; a finished run adds its cases. "
                                               "Relative to the repository root, or absolute; empty: no cache. "
                                               "--cache and --no-cache override it.")
    cache_max_mb: int = Field(default=512, ge=1, description="The result cache's bound: past it, the least "
                                                            "recently used entries are removed.")
    session_confinement: Literal["auto", "required", "off"] = Field(
        default="auto",
        description="claude-code: confine every process of a session with Landlock (Linux 5.13+): it reads only the "
                    "system's folders and its own folder and writes only its own folder, so nothing a session runs "
                    "can reach the run folder, the library's answer keys or this machine's files. auto: when the "
                    "kernel allows it, else sessions run unconfined and every report says so; required: a machine "
                    "without it is an error; off: never (a repository's settings cannot choose this under "
                    "--untrusted-settings).")


class CostSettings(_Strict):
    """What the plan's expected cost assumes of a session (runner.plan.planner). The worst case never uses it."""

    basis: str = Field(
        default="auto",
        description="Where the plan's expected cost takes, per case kind, the turns, first-turn input, growth and "
                    "output per turn a previous run measured. auto: the newest earlier run of the same host and "
                    "model in the folder this run's folder is made in (runs/ without --out); a run folder (or its "
                    "results.json), relative to the repository root or absolute: that run; empty: [run] "
                    "expected_turns and the defaults below.")
    output_tokens_per_turn: int = Field(default=1000, ge=0, description="Without a basis: the output of one model "
                                                                        "turn (at most max_output_tokens).")
    growth_tokens_per_turn: int | None = Field(
        default=None, ge=0,
        description="Without a basis: what one turn adds to the next turn's input (its output, a tool call and its "
                    "result). Empty: the library's mean SKILL.md size / 4 + 100 (a skill loaded per turn).")
    cache_ttl_s: float = Field(default=300, gt=0, description="The prompt cache's lifetime (5 minutes; each read "
                                                               "renews it). When sessions may start further apart "
                                                               "than this, the plan expects every one to write.")


class CalibrationThresholds(_Strict):
    min_agreement: float = Field(default=0.9, ge=0, le=1)
    max_false_pass: float = Field(default=0.05, ge=0, le=1, description="Judge PASS where the label is FAIL.")
    max_false_fail: float = Field(default=0.10, ge=0, le=1, description="Judge FAIL where the label is PASS.")
    max_judge_error: float = Field(default=0.05, ge=0, le=1)


class JudgeSettings(_Strict):
    enabled: bool = Field(default=True, description="false: prose assertions stay UNRUN (not-judged).")
    model: str = "claude-sonnet-4-6"
    timeout_s: float = Field(default=60, gt=0)
    max_tokens: int = Field(default=2048, ge=64)
    max_retries: int = Field(default=2, ge=0)
    require_calibration: bool = Field(
        default=False, description="Judge only with a passing calibration record for this judge model and prompt "
                                   "version (.skill-evals/judge-calibration.json); else prose assertions stay UNRUN "
                                   "(judge-not-calibrated).")
    calibration: CalibrationThresholds = CalibrationThresholds()


class Price(_Strict):
    input: float = Field(ge=0, description="USD per million input tokens.")
    output: float = Field(ge=0)
    cache_write: float | None = Field(default=None, ge=0, description="Default 1.25 x input.")
    cache_read: float | None = Field(default=None, ge=0, description="Default 0.1 x input.")
    cache_min_tokens: int | None = Field(default=None, ge=0, description="The shortest prefix the model caches; "
                                                                         "default 1024.")


class CaseOverride(_Strict):
    uid: str = Field(description="`<skill>/<source>/<id>`")
    kind: CaseKind
    reason: str = Field(min_length=1)


class AssertionOverride(_Strict):
    uid: str
    index: int = Field(ge=1, description="1-based position of the assertion in the case.")
    assertion_class: AssertionClass = Field(alias="class")
    reason: str = Field(min_length=1)


class TriggerSetSettings(_Strict):
    """A skill-creator trigger set: a JSON list of {query, should_trigger} for one skill."""

    skill: str = Field(min_length=1)
    path: str = Field(min_length=1, description="Relative to the repository root.")


class ProbeSettings(_Strict):
    """Tier-2 probes (seed 000): calibration and runs."""

    explicit_invocation: bool = Field(
        default=False, description="The treatment prompt starts with `/<skill>` on its own line, so the skill is "
                                   "loaded by the user's command: measures the discipline apart from routing.")
    calibration_reps: int = Field(default=2, ge=1, le=10, description="Reps per arm in `calibrate` (seed 000: 2).")
    allow_uncalibrated: bool = Field(
        default=False, description="Seed 000 calls live calibration optional: `run` also executes (both arms) a probe "
                                   "with no finished calibration of its current content (never calibrated, edited "
                                   "since, or a calibration left unfinished), labelled `uncalibrated` in results.json "
                                   "and every report. A calibration verdict outside run_verdicts still keeps its "
                                   "probe UNRUN.")
    run_verdicts: list[Literal["ceiling", "window", "floor", "inconclusive"]] = Field(
        default=["window", "ceiling"],
        description="Calibration verdicts whose probes `run` executes (both arms); others stay UNRUN with the verdict "
                    "as the reason. Ceiling probes are kept as easy regression controls (seed 000).")


class Settings(_Strict):
    library: LibrarySettings = LibrarySettings()
    validator: ValidatorSettings = ValidatorSettings()
    limits: LimitsSettings = LimitsSettings()
    listing: ListingSettings = ListingSettings()
    classify: ClassifySettings = ClassifySettings()
    case_override: list[CaseOverride] = []
    assertion_override: list[AssertionOverride] = []
    trigger_set: list[TriggerSetSettings] = []
    run: RunSettings = RunSettings()
    cost: CostSettings = CostSettings()
    judge: JudgeSettings = JudgeSettings()
    tiers: TiersSettings = TiersSettings()
    sequential: SequentialSettings = SequentialSettings()
    select: SelectSettings = SelectSettings()
    probes: ProbeSettings = ProbeSettings()
    prices: dict[str, Price] = Field(default={}, description="Add or override model prices (USD per million tokens).")


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _line_of_key(text: str, loc: tuple[Any, ...]) -> int:
    """Best line for a validation error: the last key of its location that the text names."""
    names = [part for part in loc if isinstance(part, str)]
    lines = text.splitlines()
    for name in reversed(names):
        pattern = re.compile(rf"^\s*(\[+\s*)?{re.escape(name)}\b")
        for number, line in enumerate(lines, start=1):
            if pattern.search(line):
                return number
    return 1


def load(path: Path | None, base: Path) -> tuple[Settings, list[Finding]]:
    """Settings from the file (defaults when there is none) and the findings of reading it."""
    if path is None or not path.exists():
        return Settings(), []
    shown = display_path(path, base)
    try:
        # The repository (or an option) names it: a FIFO, a device, a link to one, a huge file is refused unopened.
        text = bounded.read_text(path, bounded.SETTINGS_MAX_BYTES)
    except UnicodeDecodeError as exc:
        return Settings(), [error("settings-unreadable", shown, 1, f"cannot read the settings file: it is not UTF-8 "
                                                                   f"(byte {exc.start}: {exc.reason})")]
    except OSError as exc:
        return Settings(), [error("settings-unreadable", shown, 1,
                                  f"cannot read the settings file: {exc.strerror or exc}")]
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        match = _TOML_POSITION.search(str(exc))
        line, col = (int(match.group(1)), int(match.group(2))) if match else (1, None)
        return Settings(), [error("settings-syntax", shown, line, f"invalid TOML: {exc}", col=col)]
    except RecursionError:  # tomllib recurses per nested array or inline table
        return Settings(), [error("settings-syntax", shown, 1, bounded.nesting_message("the settings file"))]
    except ValueError as exc:
        # tomllib raises a bare ValueError for an integer past Python's 4,300-digit limit.
        return Settings(), [error("settings-syntax", shown, 1, f"invalid TOML value: {exc}")]
    if bounded.too_deep(raw):
        return Settings(), [error("settings-syntax", shown, 1, bounded.nesting_message("the settings file"))]
    try:
        return Settings.model_validate(raw), []
    except ValidationError as exc:
        findings = []
        for problem in exc.errors():
            where = ".".join(str(p) for p in problem["loc"]) or "the file"
            findings.append(error("settings-invalid", shown, _line_of_key(text, problem["loc"]),
                                  f"{where}: {_problem_text(problem)}"))
        return Settings(), findings


def _problem_text(problem: Any) -> str:
    """pydantic's message in the settings file's words: no "Value error," prefix, no class names."""
    message = str(problem.get("msg", "")).removeprefix("Value error, ").removeprefix("Assertion failed, ")
    if problem.get("type") in ("model_type", "model_attributes_type", "dict_type"):
        return f"must be a table (e.g. [{'.'.join(str(p) for p in problem['loc'])}]), not {_toml_type(problem)}"
    if problem.get("type") == "extra_forbidden":
        return "unknown key (a typo? docs/configuration.md lists every key)"
    return message


def _toml_type(problem: Any) -> str:
    value = problem.get("input")
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "an array"}.get(
        type(value), "a value")
