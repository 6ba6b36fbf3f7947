"""What a repository's settings may decide when they come from the code under review (`--untrusted-settings`,
which the GitHub Action always passes).

POLICY has one rule per key of the Settings model (a test checks that), and `check` holds the file's keys against
it: such settings are data about the library, never control over spend, tools or bounds.

Design notes: docs/design/floor-and-trust.md.
"""

from __future__ import annotations

import json
import math
import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from runner.corpus.settings import HOST_DEFAULT_LISTING_BUDGET, READ_ONLY_TOOLS, RunSettings, Settings

# The cap without --max-usd: the runner's own default, never the repository's.
RUNNER_CAP_USD: float = RunSettings.model_fields["max_usd"].default
# Bounds of the untrusted settings, past the defaults (docs/configuration.md repeats them).
MAX_REPEATS = 11  # N: a tight quorum; more is the workflow's choice (--repeats, the action's `repeats` input)
MAX_CONCURRENCY = 16  # each session is a Claude Code process on the runner
MAX_SESSION_S = 900.0  # a session longer than 15 minutes is a hang, not an eval
MAX_OUTPUT_TOKENS = 128_000  # more than any model returns in one call
MAX_RATE_LIMIT_PAUSE_S = 300.0
MAX_JUDGE_S = 300.0

Path_ = tuple[str | int, ...]  # a key's place in the settings: ("run", "max_usd"), ("prices", "m", "input")


@dataclass(frozen=True)
class Bounds:
    """What a rule is checked against besides the value: the repository, and the cap the runner was given."""

    root: Path
    cap_usd: float | None = RUNNER_CAP_USD  # None: the cap is not known here (`validate`): `run` and `plan` check it


class Rule:
    may: str = ""  # what the repository may do with the key, in a few words (docs and messages)

    def __init__(self, why: str):
        self.why = why

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        """Why the value is refused, or None."""
        raise NotImplementedError


class Free(Rule):
    may = "set"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        return None


class Default(Rule):
    may = "only the default"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        return None if default is not PydanticUndefined and value == default else self.why


class AtMost(Rule):
    may = "lower only"

    def __init__(self, why: str, limit: float | None = None):
        super().__init__(why)
        self.limit = limit  # None: the default
        if limit is not None:
            self.may = f"at most {limit:,g}"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        limit = default if self.limit is None else self.limit
        if value is None or value <= limit:
            return None
        return f"above {_shown(limit)}: {self.why}"


class AtLeast(Rule):
    may = "raise only"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        return None if value >= default else f"below {_shown(default)}: {self.why}"


class Cap(Rule):
    may = "lower only"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        if bounds.cap_usd is None or value <= bounds.cap_usd:
            return None
        return f"above the cap of ${bounds.cap_usd:,.2f}: {self.why}"


class Tools(Rule):
    may = "a subset of the read-only tools"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        others = [tool for tool in value if tool not in READ_ONLY_TOOLS]
        if others:
            return f"{', '.join(others)} {'is' if len(others) == 1 else 'are'} not read-only: {self.why}"
        return None if "Skill" in value else f"without Skill no skill can activate: {self.why}"


class Keeps(Rule):
    may = "add entries only"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        missing = [entry for entry in default if entry not in value]
        return f"leaves out {', '.join(map(json.dumps, missing))}: {self.why}" if missing else None


class Within(Rule):
    may = "remove entries only"

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        added = [entry for entry in value if entry not in default]
        return f"adds {', '.join(map(json.dumps, added))}: {self.why}" if added else None


class Inside(Rule):
    may = "a path inside the repository"

    def __init__(self, why: str, words: tuple[str, ...] = ()):
        super().__init__(why)
        self.words = words  # values that are no path (`[cost] basis = "auto"`)

    def refuse(self, value: Any, default: Any, bounds: Bounds) -> str | None:
        paths = value if isinstance(value, list) else [value]
        outside = [p for p in paths if p is not None and p not in self.words and not _inside(p, bounds.root)]
        return f"{', '.join(map(json.dumps, outside))} is not inside the repository: {self.why}" if outside else None


def _inside(path: str, root: Path) -> bool:
    if Path(path).is_absolute():
        return False
    real_root = root.resolve()
    return (real_root / path).resolve().is_relative_to(real_root)


# ---- the policy: every key of Settings, with what the repository may do with it and why ---------------------------

# Each reason is one clause, shown after the key in the refusal line (no semicolons: they separate the keys there).
_CORPUS = "how the repository's own files are read, which a pull request could as well edit"
_ESTIMATE = "the plan's expected cost only, while the cap reserves every session's worst case, which never uses it"
_MEASURED = "what is measured, which the plan and every report record"
_UNDER_CAP = "more sessions or tokens, all reserved against the cap"
_RETRIES = ("each retry of a lost reply is billed while a session's reservation counts one request, so more retries "
            "would spend past it")
_OFF_SWITCH = ("a pull request may not switch its own evaluation off, since UNRUN cases never fail a required "
               "lane")

POLICY: dict[str, Rule] = {
    "library.roots": Inside("skills are copied into sessions and sent to the model, only the repository's"),
    "library.skills": Inside("skills are copied into sessions and sent to the model, only the repository's"),
    "library.agents": Inside("subagent files are copied into sessions and sent to the model, only the repository's"),
    "library.templates": Within("a template's cases are not run, so another pattern would take skills' cases out of "
                                "the run"),
    "validator.command": Free("the validator is the repository's own code, which a pull request can rewrite "
                              "whatever the settings name, run sandboxed, and the runner's own checks always run "
                              "after it"),
    "validator.enabled": Default("the library's validator is part of the floor, which a pull request may not switch "
                                 "off"),
    "validator.timeout_s": AtMost("the validate step is required: a longer bound lets a validator hold it"),
    "limits.max_file_bytes": AtMost("a larger file is read into every session, a smaller bound only reports more"),
    "limits.max_probe_lines": AtMost("a floor rule, seed 000 rule 5, which a pull request may not loosen"),
    "listing.budget_chars": AtMost("a larger listing shows the model descriptions Claude Code's own default budget "
                                   "drops, which only --listing-budget may", HOST_DEFAULT_LISTING_BUDGET),
    "listing.max_description_chars": AtMost("Claude Code cuts each description there, and a larger value shows the "
                                            "model more than the host does"),
    "classify.refusal_id_prefixes": Free(_CORPUS),
    "classify.refusal_id_exclude_prefixes": Free(_CORPUS),
    "classify.refusal_types": Free(_CORPUS),
    "classify.halt_id_prefixes": Free(_CORPUS),
    "case_override.*.*": Free(_CORPUS + ", and the census lists every override with its reason"),
    "assertion_override.*.*": Free(_CORPUS + ", and the census lists every override with its reason"),
    "trigger_set.*.skill": Free(_CORPUS),
    "trigger_set.*.path": Inside("a trigger set is read into the run, only the repository's files"),
    "run.host": Free(_MEASURED + ", an approximation saying so"),
    "run.model": Free(_MEASURED + ", priced by the runner's table only"),
    "run.host_models": Free(_MEASURED + ", priced by the runner's table only"),
    "run.max_turns": Free(_UNDER_CAP),
    "run.timeout_s": AtMost("a longer session is a hang, not an eval", MAX_SESSION_S),
    "run.max_output_tokens": AtMost(_UNDER_CAP, MAX_OUTPUT_TOKENS),
    "run.expected_turns": Free(_ESTIMATE),
    "run.concurrency": AtMost("each session is a process on the runner", MAX_CONCURRENCY),
    "run.max_usd": Cap("the repository may lower the cap, never raise it: it comes from --max-usd, the action's "
                       "max-usd input"),
    "run.disabled": Default(_OFF_SWITCH + ": the kill switch is SKILL_EVALS_DISABLED=1 in the job's environment"),
    "run.allowed_tools": Tools("a session may only read, with " + ", ".join(sorted(READ_ONLY_TOOLS))),
    "run.cli_path": Default("a program the settings name would be executed with the API key, so the CLI bundled "
                            "with claude-agent-sdk is used"),
    "run.rate_limit_pause_s": AtMost("a longer pause holds the run", MAX_RATE_LIMIT_PAUSE_S),
    "run.early_stop": Free("the verdict is the same either way, with " + _UNDER_CAP),
    "run.decide_early": Free("the verdict is the same either way, with " + _UNDER_CAP),
    "run.baseline": Free(_UNDER_CAP),
    "run.verdict": Free("both rules bound a wrong verdict, and the sequential rule's bounds may only be tightened "
                        "here"),
    "run.host_max_retries": AtMost(_RETRIES),
    "run.cache": Default("a cache another run trusts is named by the workflow (--cache), never by the code under "
                         "review, which could name entries it wrote"),
    "run.cache_max_mb": Free("how much of the cache is kept changes what is run again, never a verdict"),
    "run.session_namespace": Default("how each session's process is confined on the runner is the runner's choice"),
    "run.session_confinement": Default("the wall around a session's processes is the runner's: `off` would let "
                                       "whatever a session runs reach the run folder and the runner's files"),
    "cost.basis": Inside(_ESTIMATE + ", from a run folder of the repository", words=("auto", "")),
    "cost.output_tokens_per_turn": Free(_ESTIMATE),
    "cost.growth_tokens_per_turn": Free(_ESTIMATE),
    "cost.cache_ttl_s": Free(_ESTIMATE),
    "judge.enabled": Default(_OFF_SWITCH + ": --no-judge is the runner's"),
    "judge.model": Free(_MEASURED + ", priced by the runner's table only"),
    "judge.timeout_s": AtMost("a longer wait holds the run", MAX_JUDGE_S),
    "judge.max_tokens": AtMost(_UNDER_CAP, MAX_OUTPUT_TOKENS),
    "judge.max_retries": AtMost(_RETRIES),
    "judge.require_calibration": Default(_OFF_SWITCH + ": the calibration record is a file the pull request can "
                                         "write or delete, so the requirement guards nothing here"),
    "judge.calibration.min_agreement": AtLeast("a calibration threshold: a pull request may not loosen it"),
    "judge.calibration.max_false_pass": AtMost("a calibration threshold: a pull request may not loosen it"),
    "judge.calibration.max_false_fail": AtMost("a calibration threshold: a pull request may not loosen it"),
    "judge.calibration.max_judge_error": AtMost("a calibration threshold: a pull request may not loosen it"),
    "tiers.*.repeats": AtMost("more is the workflow's choice: --repeats, the action's repeats input", MAX_REPEATS),
    "tiers.*.quorum": Free("a majority of N whatever it is, as the settings check k > N/2"),
    "tiers.*.baseline": Free(_UNDER_CAP),
    "tiers.*.verdict": Free("both rules bound a wrong verdict, and the sequential rule's bounds may only be "
                            "tightened here"),
    "sequential.pass_rate": AtLeast("a lower pass rate passes cases on less: a pull request may not loosen it"),
    "sequential.indifference": AtMost("a wider band decides on less evidence: a pull request may not loosen it"),
    "sequential.alpha": AtMost("a wrong-verdict bound: a pull request may not loosen it"),
    "sequential.beta": AtMost("a wrong-verdict bound: a pull request may not loosen it"),
    "sequential.max_repeats": AtMost(_UNDER_CAP, MAX_REPEATS),
    "sequential.round_size": Free("when the rule looks, which its bounds hold for"),
    "select.cadence_fraction": Free("which cases a cadence period runs, every case still once per cycle"),
    "select.period": Free("which cases a cadence period runs, every case still once per cycle"),
    "select.max_full_cases": Free(_UNDER_CAP),
    "select.settings_paths": Keeps("a change to the runner's own settings selects every case"),
    "probes.explicit_invocation": Free(_MEASURED),
    "probes.calibration_reps": Free(_UNDER_CAP),
    "probes.allow_uncalibrated": Free(_UNDER_CAP + "; it adds probes to what runs, never changes a verdict, and every "
                                      "report labels such a probe uncalibrated"),
    "probes.run_verdicts": Keeps(_OFF_SWITCH),
    "prices.*.*": Default("prices come from the runner's table, runner/data/prices.json"),
}


# ---- checking a file's settings against it ------------------------------------------------------------------------

@dataclass(frozen=True)
class Refusal:
    path: Path_
    value: Any
    why: str
    line: int | None = None

    def shown(self) -> str:
        at = f"line {self.line}: " if self.line else ""
        return f"{key_shown(self.path)} = {_shown(self.value)} ({at}{self.why})"


def _by_line(refusal: Refusal) -> int:
    return refusal.line if refusal.line is not None else 1 << 30


def check(settings: Settings, bounds: Bounds, text: str = "") -> list[Refusal]:
    """Every key the settings file sets that its rule refuses; with `text` (the file), each with its line, in the
    file's order."""
    refusals = []
    for path, value, default in set_keys(settings):
        why = rule_for(path).refuse(value, default, bounds)
        if why is not None:
            refusals.append(Refusal(path, value, why, locate(text, path) if text else None))
    return sorted(refusals, key=_by_line)


def effective_cap(settings: Settings, cap_usd: float) -> float:
    """The cap of a run under untrusted settings: the runner's, lowered by the repository's [run] max_usd."""
    return min(cap_usd, settings.run.max_usd) if "max_usd" in settings.run.model_fields_set else cap_usd


def rule_for(path: Path_) -> Rule:
    for pattern, rule in POLICY.items():
        if _matches(pattern, path):
            return rule
    raise KeyError(f"no trust rule for {'.'.join(map(str, path))}: add it to runner.corpus.trust.POLICY")


def _matches(pattern: str, path: Path_) -> bool:
    parts = pattern.split(".")
    return len(parts) == len(path) and all(p == "*" or p == str(q) for p, q in zip(parts, path))


def _models_in(annotation: Any) -> tuple[str, type[BaseModel]] | None:
    """("table" | "each", model) when the annotation is a model, or a dict or list of models; else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "table", annotation
    args = typing.get_args(annotation)
    if typing.get_origin(annotation) in (dict, list) and args and isinstance(args[-1], type) and \
            issubclass(args[-1], BaseModel):
        return "each", args[-1]
    return None


def set_keys(model: BaseModel, path: Path_ = ()) -> Iterator[tuple[Path_, Any, Any]]:
    """(path, value, default) of every key the file set, tables walked into (pydantic records what was given)."""
    fields = type(model).model_fields
    for name, field in fields.items():
        if name not in model.model_fields_set:
            continue
        value, where = getattr(model, name), (*path, name)
        nested = _models_in(field.annotation)
        if nested is None:
            yield where, value, field.get_default(call_default_factory=True)
        elif nested[0] == "table":
            yield from set_keys(value, where)
        else:
            items = value.items() if isinstance(value, dict) else enumerate(value)
            for key, item in items:
                yield from set_keys(item, (*where, key))


def leaf_patterns(model: type[BaseModel] = Settings, path: tuple[str, ...] = ()) -> list[str]:
    """Every key of the model as a pattern (`*` for a table's name or a list's position): what POLICY must cover."""
    out: list[str] = []
    for name, field in model.model_fields.items():
        nested = _models_in(field.annotation)
        if nested is None:
            out.append(".".join((*path, name)))
        else:
            out += leaf_patterns(nested[1], (*path, name) if nested[0] == "table" else (*path, name, "*"))
    return out


# ---- showing a key as the settings file writes it -------------------------------------------------------------

_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def _key(part: str | int) -> str:
    return part if isinstance(part, str) and part.isidentifier() else json.dumps(str(part))


def key_shown(path: Path_) -> str:
    """`[run] max_usd`, `[prices."claude-sonnet-4-6"] input`, `[[trigger_set]] path (entry 2)`."""
    if len(path) >= 3 and isinstance(path[1], int):  # an entry of an array of tables
        return f"[[{_key(path[0])}]] {'.'.join(map(_key, path[2:]))} (entry {path[1] + 1})"
    if len(path) == 1:
        return _key(path[0])
    return f"[{'.'.join(map(_key, path[:-1]))}] {_key(path[-1])}"


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "(unset)"
    elif isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) < 1e15:
        text = str(int(value))
    elif isinstance(value, (int, float)):
        text = str(value)
    else:
        text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


# ---- the line of a key in the file's text ------------------------------------------------------------------------

SETTINGS_TEXT_BYTES = 1_048_576


def settings_text(path: Path) -> str:
    """The settings file's text once more, only for the line of each key. It parsed already (its reading is bounded
    where it is read, runner.corpus.settings.load): a file that is not a regular file now, or is not UTF-8, gives
    no lines, and at most SETTINGS_TEXT_BYTES are read."""
    try:
        if not path.is_file():
            return ""
        with path.open("rb") as handle:
            return handle.read(SETTINGS_TEXT_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return ""


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_ASSIGN = re.compile(r"^\s*([A-Za-z0-9_\-.\"' ]+?)\s*=")
_PART = re.compile(r"\s*(\"(?:[^\"\\]|\\.)*\"|'[^']*'|[A-Za-z0-9_-]+)\s*")


def _parts(dotted: str) -> list[str]:
    out = []
    for match in _PART.finditer(dotted):
        token = match.group(1)
        if token.startswith('"'):
            try:
                token = json.loads(token)
            except ValueError:
                token = token[1:-1]
        elif token.startswith("'"):
            token = token[1:-1]
        out.append(token)
    return out


def locate(text: str, path: Path_) -> int | None:
    """The line that sets `path` (best effort: the line of its table, or of the inline table holding it, when the
    key itself is not on a line of its own); None when the text does not show it."""
    want = [str(p) for p in path]
    table: list[str] = []
    entries: dict[str, int] = {}
    best: tuple[int, int] | None = None  # (how many parts of the path matched, line)
    for number, line in enumerate(text.splitlines(), start=1):
        header = _HEADER.match(line)
        if header:
            table = _parts(header.group(2))
            if header.group(1) == "[[":
                name = ".".join(table)
                entries[name] = entries.get(name, -1) + 1
                table = [*table, str(entries[name])]
            here = table
        else:
            assign = _ASSIGN.match(line)
            if not assign:
                continue
            here = [*table, *_parts(assign.group(1))]
        matched = 0
        for mine, theirs in zip(here, want):
            if mine != theirs:
                break
            matched += 1
        if matched == len(want) and len(here) == len(want):
            return number
        if matched == len(here) and matched and (best is None or matched > best[0]):
            best = (matched, number)
    return best[1] if best else None
