#!/usr/bin/env python3
"""The action's own bookkeeping, in the standard library only (it runs before and beside skill-evals).

    lane.py context   which tier, which commits, which shard, where the run folder goes
    lane.py outputs   the step outputs and the job summary lines, from RUN_DIR/results.json
    lane.py gate      in required mode, fail the job when the eval lane failed

Every value comes from the environment (the action maps its inputs to env variables, never into a
script's text), and every output is one `key=value` line appended to $GITHUB_OUTPUT.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

TIERS = ("pr", "cadence", "full")
MODES = ("advisory", "required")
RAN = ("PASS", "FAIL", "UNDECIDED", "ERROR", "JUDGE-ERROR")
BAD = ("FAIL", "ERROR", "JUDGE-ERROR")
COUNTS = {"PASS": "pass", "FAIL": "fail", "UNDECIDED": "undecided", "ERROR": "error", "JUDGE-ERROR": "judge-error",
          "QUARANTINED": "quarantined", "UNRUN": "unrun"}
PR_EVENTS = ("pull_request", "pull_request_target")
ZERO_SHA = re.compile(r"^0+$")
SHARD = re.compile(r"^([1-9][0-9]*)/([1-9][0-9]*)$")


class Usage(Exception):
    """A misconfigured input: the step fails with this message (not an eval result)."""


def env(name: str, default: str = "") -> str:
    return os.environ.get(name, default).strip()


def set_output(name: str, value: object) -> None:
    text = str(value)
    if "\n" in text or "\r" in text:
        raise Usage(f"output {name} would span lines")
    target = os.environ.get("GITHUB_OUTPUT")
    line = f"{name}={text}\n"
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(line)
    print(f"{name}={text}")


def summary(lines: list[str]) -> None:
    target = os.environ.get("GITHUB_STEP_SUMMARY")
    if target and lines:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write("\n".join(lines) + "\n\n")


def annotate(level: str, message: str) -> None:
    """A workflow command; % and newlines escaped so the message cannot end the command."""
    clean = message.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    print(f"::{level}::{clean}")


def read_event() -> dict:
    path = env("GITHUB_EVENT_PATH")
    if not path:
        return {}
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        annotate("warning", f"skill-evals: the event payload could not be read ({type(exc).__name__})")
        return {}
    return data if isinstance(data, dict) else {}


def _sha(value: object) -> str:
    return value if isinstance(value, str) and value and not ZERO_SHA.match(value) else ""


def resolve_tier(requested: str, event_name: str, event: dict) -> tuple[str, str]:
    """(tier, why). `auto` follows the event: pull request -> pr, schedule -> cadence,
    workflow_dispatch -> its `tier` input (else full), push and merge queue -> pr."""
    requested = requested or "auto"
    if requested in TIERS:
        return requested, "the tier input"
    if requested != "auto":
        raise Usage(f"tier {requested!r}: use auto, pr, cadence or full")
    if event_name in PR_EVENTS or event_name == "merge_group":
        return "pr", f"the {event_name} event"
    if event_name == "schedule":
        return "cadence", "the schedule event"
    if event_name == "workflow_dispatch":
        inputs = event.get("inputs") if isinstance(event.get("inputs"), dict) else {}
        chosen = str(inputs.get("tier") or "").strip()
        if chosen in TIERS:
            return chosen, "the workflow_dispatch input tier"
        if chosen and chosen != "auto":
            raise Usage(f"the workflow_dispatch input tier is {chosen!r}: use pr, cadence or full")
        return "full", "a workflow_dispatch without a tier input"
    if event_name == "push":
        if _sha(event.get("before")):
            return "pr", "the push event (the commits it pushed)"
        return "full", "a push with no previous commit"
    raise Usage(f"tier auto does not know the {event_name or 'unknown'} event: set the tier input (pr, cadence, full)")


def commits(event_name: str, event: dict) -> tuple[str, str]:
    """(base, head) for the pr tier, from the event payload."""
    if event_name in PR_EVENTS:
        pull = event.get("pull_request") if isinstance(event.get("pull_request"), dict) else {}
        base = pull.get("base") if isinstance(pull.get("base"), dict) else {}
        head = pull.get("head") if isinstance(pull.get("head"), dict) else {}
        return _sha(base.get("sha")), _sha(head.get("sha"))
    if event_name == "merge_group":
        group = event.get("merge_group") if isinstance(event.get("merge_group"), dict) else {}
        return _sha(group.get("base_sha")), _sha(group.get("head_sha"))
    if event_name == "push":
        return _sha(event.get("before")), _sha(event.get("after"))
    return "", ""


def is_fork(event_name: str, event: dict) -> bool:
    """A pull request whose head lives in another repository (a deleted fork has no head repository)."""
    if event_name not in PR_EVENTS:
        return False
    pull = event.get("pull_request") if isinstance(event.get("pull_request"), dict) else {}
    head_repo = ((pull.get("head") or {}).get("repo") or {}).get("full_name")
    base_repo = ((pull.get("base") or {}).get("repo") or {}).get("full_name")
    return head_repo is None or (base_repo is not None and head_repo.lower() != base_repo.lower())


def context() -> int:
    event_name = env("GITHUB_EVENT_NAME")
    event = read_event()
    mode = env("INPUT_MODE", "advisory") or "advisory"
    if mode not in MODES:
        raise Usage(f"mode {mode!r}: use advisory (the default) or required")
    for name in ("INPUT_CONTAINER", "INPUT_COMMENT", "INPUT_PUBLISH", "INPUT_INSTALL", "INPUT_CACHE"):
        value = env(name, "true") or "true"
        if value not in ("true", "false"):
            raise Usage(f"{name[6:].lower()} {value!r}: use true or false")
    tier, why = resolve_tier(env("INPUT_TIER"), event_name, event)
    base, head = ("", "")
    if tier == "pr":
        base, head = commits(event_name, event)
        base, head = env("INPUT_BASE") or base, env("INPUT_HEAD") or head
        if not base:
            raise Usage("the pr tier needs a base commit: run on pull_request (or push, merge_group), "
                        "or set the base input")
    shard = env("INPUT_SHARD")
    label = tier
    if shard:
        match = SHARD.match(shard)
        if not match or int(match.group(1)) > int(match.group(2)):
            raise Usage(f"shard {shard!r}: use i/n with 1 <= i <= n, e.g. 2/4")
        label = f"{tier}-shard-{match.group(1)}-of-{match.group(2)}"
    work = Path(env("RUNNER_TEMP") or tempfile.gettempdir()) / "skill-evals"
    work.mkdir(parents=True, exist_ok=True)
    run_dir, number = work / label, 1
    while run_dir.exists():  # the action used twice in one job: never reuse a run folder
        number += 1
        run_dir = work / f"{label}-{number}"
    artifact = env("INPUT_ARTIFACT_NAME") or (f"skill-evals-{label}" if number == 1 else f"skill-evals-{label}-{number}")
    fork = is_fork(event_name, event)
    if event_name == "pull_request_target":
        annotate("warning", "skill-evals on pull_request_target: this event runs with the base repository's "
                            "secrets. If the job checked out the pull request's head, the library validator (code "
                            "from that pull request) runs in a job holding them. Use on: pull_request instead.")
    # A pull request's code is under review, its settings file too: every step reads the settings of the commit it
    # would be merged into (skill-evals --settings-commit), and the pull request's own take effect after the merge.
    settings_commit = commits(event_name, event)[0] if event_name in PR_EVENTS else ""
    print(f"tier {tier} (from {why}); mode {mode}" + (f"; base {base}, head {head or 'HEAD'}" if tier == "pr" else "")
          + (f"; shard {shard}" if shard else "") + ("; a pull request from a fork" if fork else "")
          + (f"; settings from the base commit {settings_commit}" if settings_commit else ""))
    for name, value in (("tier", tier), ("mode", mode), ("base", base), ("head", head), ("shard", shard),
                        ("work-dir", work), ("run-dir", run_dir), ("artifact-name", artifact),
                        ("fork", str(fork).lower()), ("settings-commit", settings_commit),
                        *cache_outputs(event_name, event, work, label, fork)):
        set_output(name, value)
    return 0


CACHE_FORMAT = "v1"  # in every key: a runner whose entries mean something else starts a new line of caches


def cache_outputs(event_name: str, event: dict, work: Path, label: str, fork: bool) -> list[tuple[str, str]]:
    """The result cache (runner.cache) as GitHub's cache holds it: one line of caches per branch, `prefix` naming
    it (a pull request's is its base branch's), `key` this run's save. GitHub keeps a cache in the scope of the ref
    that saved it, and a pull request's run reads its own scope, then its base branch's: so a pull request's save
    is read by its own later runs only, never by its base branch. A pull request from a fork, and any
    pull_request_target run (it runs in the base branch's scope), only read: they run skill-evals with
    --cache-read-only and save nothing."""
    if (env("INPUT_CACHE", "true") or "true") != "true":
        return [("cache-dir", ""), ("cache-save", "false"), ("cache-read-only", "false")]
    pull = event.get("pull_request") if isinstance(event.get("pull_request"), dict) else {}
    base = pull.get("base") if isinstance(pull.get("base"), dict) else {}
    scope = (base.get("ref") if event_name in PR_EVENTS else None) or env("GITHUB_BASE_REF") or \
        env("GITHUB_REF_NAME") or "unknown"
    prefix = f"skill-evals-cache-{CACHE_FORMAT}-{re.sub(r'[^A-Za-z0-9._-]+', '_', str(scope))}-"
    run = f"{env('GITHUB_RUN_ID') or 'local'}-{env('GITHUB_RUN_ATTEMPT') or '1'}-{label}"
    read_only = fork or event_name == "pull_request_target"
    where = f"{env('GITHUB_REPOSITORY')} run {env('GITHUB_RUN_ID')} ({event_name}) at {env('GITHUB_SHA')[:12]}"
    return [("cache-dir", str(work / "cache")), ("cache-prefix", prefix), ("cache-key", prefix + run),
            ("cache-save", str(not read_only).lower()), ("cache-read-only", str(read_only).lower()),
            ("cache-label", where)]


def ran(case: dict) -> bool:
    """The case was executed: its state (a quarantined case's underlying state) is one only a run gives."""
    state = case.get("underlying_state") if case.get("state") == "QUARANTINED" else case.get("state")
    return state in RAN


def conclusion(cases: list[dict], mode: str) -> str:
    """The same rule as the check run (runner.publish.rules.conclusion): quarantined cases never count; nothing
    executed is neutral; FAIL, ERROR or JUDGE-ERROR are neutral in advisory mode and failure in required; else an
    UNDECIDED case (the sequential verdict left it open) is neutral in both, never success."""
    counted = [c for c in cases if c.get("state") in RAN]
    if not counted:
        return "neutral"
    if any(c.get("state") in BAD for c in counted):
        return "failure" if mode == "required" else "neutral"
    if any(c.get("state") == "UNDECIDED" for c in counted):
        return "neutral"
    return "success"


ORDER = ("success", "neutral", "failure")


def host_conclusion(host: dict, mode: str) -> str:
    """One host of a comparison (results.json `hosts.hosts[]`), from its counts, by the same rule."""
    counts = host.get("counts") if isinstance(host.get("counts"), dict) else {}
    if host.get("refused_records"):
        return "failure" if mode == "required" else "neutral"
    if not sum(int(counts.get(state) or 0) for state in RAN):
        return "neutral"
    if sum(int(counts.get(state) or 0) for state in BAD):
        return "failure" if mode == "required" else "neutral"
    return "neutral" if int(counts.get("UNDECIDED") or 0) else "success"


def compared_hosts(results: dict) -> list[dict]:
    """`run --host a,b,...`: every host's record (results.json `hosts.hosts`); [] for a run on one host."""
    found = results.get("hosts") if isinstance(results.get("hosts"), dict) else {}
    hosts = found.get("hosts") if isinstance(found.get("hosts"), list) else []
    return [host for host in hosts if isinstance(host, dict)]


NO_CREDENTIALS = ("**skill-evals: nothing was executed.** No `anthropic-api-key` reached this job, so every "
                  "selected case that could run is UNRUN (no-credentials), the others keep their own reason, and "
                  "no result is claimed for any of them.")
FORK_NOTE = ("This pull request comes from a fork: GitHub gives workflows that a fork triggers no secrets and a "
             "read-only token, so the evals are not executed here and this job summary is the only report. "
             "A maintainer can run the evals on the branch after review (workflow_dispatch), or on a "
             "schedule after the merge.")
NO_KEY_NOTE = ("Store an Anthropic API key as a repository secret (e.g. `ANTHROPIC_API_KEY`) and pass it as "
               "`anthropic-api-key: ${{ secrets.ANTHROPIC_API_KEY }}` to execute the cases.")


def outputs() -> int:
    run_dir = Path(env("RUN_DIR"))
    mode = env("MODE", "advisory") or "advisory"
    run_exit = env("RUN_EXIT", "")
    results_path = run_dir / "results.json"
    selection = Path(env("SELECTION")) if env("SELECTION") else None
    if selection and selection.is_file() and run_dir.is_dir() and not (run_dir / "selection.json").exists():
        try:  # into the uploaded folder; a folder the container wrote may not be ours to write
            shutil.copyfile(selection, run_dir / "selection.json")
        except OSError as exc:
            annotate("warning", f"skill-evals: selection.json was not copied into the run folder ({exc.strerror})")
    try:
        results = json.loads(results_path.read_text(encoding="utf-8"))
        cases = results["cases"]
        spend = float(results["spend"]["usd"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        annotate("warning", f"skill-evals: the run left no readable results.json in {run_dir} "
                            f"(run exit status {run_exit or 'unknown'}; {type(exc).__name__}); see the run step's log")
        summary([f"**skill-evals: the run produced no results** (exit status {run_exit or 'unknown'}). "
                 "Nothing is claimed for any case; the run step's log says why."])
        set_output("results-path", "")
        for key in COUNTS.values():
            set_output(key, 0)
        set_output("spend-usd", "0.0000")
        set_output("conclusion", "failure" if mode == "required" else "neutral")
        return 0
    counts = {key: 0 for key in COUNTS.values()}
    for case in cases:
        key = COUNTS.get(case.get("state"))
        if key:
            counts[key] += 1
    verdict = conclusion(cases, mode)
    hosts = compared_hosts(results)
    if hosts:  # several hosts: every host's cases counted and its conclusion weighed (a failure anywhere shows)
        counts = {key: sum(int((host.get("counts") or {}).get(state) or 0) for host in hosts)
                  for state, key in COUNTS.items()}
        spend = float(results["hosts"].get("spend_usd") or 0.0)
        verdict = max([verdict, *(host_conclusion(host, mode) for host in hosts)], key=ORDER.index)
    set_output("results-path", results_path)
    for key, value in counts.items():
        set_output(key, value)
    set_output("spend-usd", f"{spend:.4f}")
    set_output("conclusion", verdict)
    unrun = results.get("unrun_by_reason") or {}
    # No key: the runnable cases are UNRUN (no-credentials); a case the plan could never run keeps its own reason
    # (manual-only-target, probe-not-calibrated, ...), so "all no-credentials" is not the test.
    # A quarantined case was executed only when its underlying state is one a run gives: without a key it is
    # QUARANTINED over UNRUN (no-credentials), and nothing ran.
    executed = any(ran(case) for case in cases)
    no_key = (results.get("plan") or {}).get("unrun_all") == "no-credentials" or \
        unrun.get("no-credentials", 0) == len(cases)
    if cases and not executed and no_key:
        lines = [NO_CREDENTIALS, "", FORK_NOTE if env("FORK") == "true" else NO_KEY_NOTE]
        summary(lines)
    return 0


def gate() -> int:
    """Required mode only: the job fails when a lane step failed or the conclusion is failure."""
    mode = env("MODE", "advisory") or "advisory"
    problems = []
    for name, value in (("select", env("SELECT_STATUS")), ("run", env("RUN_EXIT")), ("publish", env("PUBLISH_STATUS"))):
        if value not in ("", "0"):
            problems.append(f"{name} exited {value}")
    verdict = env("CONCLUSION")
    if verdict == "failure":
        problems.append("the conclusion is failure (a FAIL, ERROR or JUDGE-ERROR case, or no results)")
    if mode != "required":
        note = "; ".join(problems) if problems else "no problem"
        print(f"advisory mode: eval results never fail the job ({note}; conclusion {verdict or 'unknown'})")
        return 0
    if problems:
        annotate("error", "skill-evals (required mode): " + "; ".join(problems))
        return 1
    print(f"required mode: passed (conclusion {verdict or 'unknown'})")
    return 0


def main(argv: list[str]) -> int:
    commands = {"context": context, "outputs": outputs, "gate": gate}
    if len(argv) != 2 or argv[1] not in commands:
        print(f"usage: {Path(argv[0]).name} {{{','.join(commands)}}}", file=sys.stderr)
        return 2
    try:
        return commands[argv[1]]()
    except Usage as exc:
        annotate("error", f"skill-evals: {exc}")
        return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
