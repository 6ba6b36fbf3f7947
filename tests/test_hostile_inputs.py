"""Hostile inputs (issue 13): numbers that are not numbers, text that is not Unicode, names that are not
UTF-8, a settings file that is not there, options a resume cannot honour.

Every one gives a one-line usage error (exit 2) or a finding with its path — never a traceback, never a
silently ignored option, never a lost result for the rest of the library. The CLI is the real one: in
process through click's CliRunner, or `python -m runner` against the fake Messages API for `run`.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runner.cli import main
from runner.corpus import settings as settings_mod
from runner.corpus.findings import render_github, render_json, render_text
from runner.corpus.layout import LibraryError
from runner.corpus.loader import load_library
from runner.floor import census as census_mod
from runner.floor import gate as floor_mod
from runner.floor import validate as validate_mod
from runner.testing.fake_anthropic import FakeAnthropic, skill, text
from tests.conftest import EXAMPLE, fake_env, line_of, run_cli
from tests.helpers import KEY, results_of

SKILLS = Path(".claude") / "skills"
TRIAGE = "test-report-triage"
NO_KEY = {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None, "SKILL_EVALS_DISABLED": None}
FAST = ("--no-library-validator", "--host", "api")


def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
    """The real CLI in process; whatever it raises stays in the result (a test asserts there is nothing)."""
    return CliRunner().invoke(main, list(args), catch_exceptions=True, env={**NO_KEY, **(env or {})})


def no_traceback(result: Result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), (
        f"{type(result.exception).__name__}: {result.exception}\n{result.output}")
    assert "Traceback" not in result.output


def refused(result: Result, *names: str) -> None:
    """A usage error (exit 2) in one line naming the option: no traceback, no pydantic dump."""
    no_traceback(result)
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.splitlines() if line.startswith(("Error: ", "skill-evals: "))]
    assert len(errors) == 1, result.output
    for name in names:
        assert name in errors[0], result.output
    assert "validation error for" not in result.output and "input_value" not in result.output, result.output


def process(*args: str, fake: FakeAnthropic | None = None, key: bool = True,
            extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=fake_env(fake, KEY if key else None, extra_env))


# ---- 1. numbers ---------------------------------------------------------------------------------------------

BAD_RUN_OPTIONS = [
    ("--max-usd", "nan"), ("--max-usd", "inf"), ("--max-usd", "-1"), ("--concurrency", "0"), ("--timeout", "0"),
    ("--timeout", "nan"), ("--timeout", "-inf"), ("--max-turns", "0"), ("--repeats", "0"), ("--repeats", "2"),
    ("--quorum", "0"), ("--listing-budget", "-1"), ("--listing-budget", "0"),
]


@pytest.mark.parametrize("command", ["plan", "run"])
@pytest.mark.parametrize("option,value", BAD_RUN_OPTIONS)
def test_a_bad_number_is_a_usage_error_naming_the_option(command: str, option: str, value: str,
                                                         tmp_path: Path) -> None:
    extra = ("--no-surface",) if command == "plan" else ("--out", str(tmp_path / "run"))
    result = invoke(command, "--library", str(EXAMPLE), *FAST, *extra, option, value)
    refused(result, option)
    assert not (tmp_path / "run").exists(), "nothing was started"


@pytest.mark.parametrize("command", ["plan", "run"])
def test_a_quorum_out_of_range_names_the_option(command: str, tmp_path: Path) -> None:
    extra = ("--no-surface",) if command == "plan" else ("--out", str(tmp_path / "run"))
    for args in (("--repeats", "3", "--quorum", "5"), ("--repeats", "5", "--quorum", "2"), ("--quorum", "4")):
        result = invoke(command, "--library", str(EXAMPLE), *FAST, *extra, *args)
        refused(result, "--quorum")
        assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("value", ["0", "nan", "-1", "inf"])
def test_batch_poll_must_be_a_positive_finite_number(value: str, tmp_path: Path) -> None:
    refused(invoke("run", "--library", str(EXAMPLE), *FAST, "--out", str(tmp_path / "run"), "--batch-poll", value),
            "--batch-poll")
    refused(invoke("judge", str(tmp_path), "--library", str(EXAMPLE), "--batch-poll", value), "--batch-poll")


@pytest.mark.parametrize("option,value", [("--max-usd", "nan"), ("--max-usd", "inf"), ("--max-usd", "-0.5")])
def test_judge_and_calibrate_refuse_a_bad_cap(option: str, value: str, tmp_path: Path) -> None:
    refused(invoke("judge", str(tmp_path), "--library", str(EXAMPLE), option, value), option)
    refused(invoke("calibrate", "--all", "--library", str(EXAMPLE), option, value), option)


def test_calibrate_refuses_no_concurrency_and_surface_a_bad_budget() -> None:
    refused(invoke("calibrate", "--all", "--library", str(EXAMPLE), "--concurrency", "0"), "--concurrency")
    for value in ("0", "-5"):
        refused(invoke("surface", "--library", str(EXAMPLE), "--host", "api", "--listing-budget", value),
                "--listing-budget")


def test_report_limit_must_be_positive(tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = invoke("run", "--library", str(EXAMPLE), *FAST, "--skill", TRIAGE, "--out", str(out))
    assert done.exit_code == 0, done.output
    assert invoke("report", str(out), "--format", "junit").exit_code == 0
    for value in ("0", "-3"):
        refused(invoke("report", str(out), "--format", "junit", "--limit", value), "--limit")


@pytest.mark.parametrize("table,key,value", [
    ("run", "max_usd", "nan"), ("run", "max_usd", "inf"), ("run", "timeout_s", "inf"),
    ("run", "rate_limit_pause_s", "inf"), ("judge", "timeout_s", "nan"), ("select", "cadence_fraction", "nan"),
    ("validator", "timeout_s", "+inf"), ('prices."claude-sonnet-4-6"', "input", "nan"),
])
def test_a_non_finite_number_in_the_settings_is_an_error_at_its_key(table: str, key: str, value: str,
                                                                    example_copy: Path) -> None:
    settings_file = example_copy / ".skill-evals.toml"
    extra = "output = 15.0\n" if table.startswith("prices") else ""
    settings_file.write_text(f"# settings\n[{table}]\n{key} = {value}\n{extra}", encoding="utf-8")
    result = invoke("validate", "--library", str(example_copy), "--format", "json", "--no-library-validator")
    no_traceback(result)
    assert result.exit_code == 1, result.output
    found = [f for f in json.loads(result.output)["findings"] if f["rule"] == "settings-invalid"]
    assert len(found) == 1, found
    assert found[0]["file"] == ".skill-evals.toml" and found[0]["line"] == 3
    assert key in found[0]["message"] and "finite" in found[0]["message"], found[0]
    refused_plan = invoke("plan", "--library", str(example_copy), *FAST, "--no-surface")
    no_traceback(refused_plan)
    assert refused_plan.exit_code == 1 and "settings-invalid" in refused_plan.output


@pytest.mark.parametrize("command", ["plan", "run"])
def test_an_out_folder_that_cannot_be_made_is_refused_before_anything(command: str, tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("not a folder", encoding="utf-8")
    extra = ("--no-surface",) if command == "plan" else ()
    for out in ("/proc/skill-evals-run", str(a_file / "run"), str(a_file), "/sys/skill-evals-run"):
        result = invoke(command, "--library", str(EXAMPLE), *FAST, *extra, "--out", out)
        refused(result, "--out")
        assert out in result.output or str(a_file) in result.output, result.output


def test_a_resume_folder_that_cannot_be_written_is_refused(tmp_path: Path) -> None:
    refused(invoke("run", "--library", str(EXAMPLE), *FAST, "--resume", "/proc/1"), "--resume")


# ---- 3. --config ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["validate", "census", "plan", "run", "surface", "select"])
def test_a_config_file_that_does_not_exist_is_a_usage_error(command: str, tmp_path: Path) -> None:
    typo = tmp_path / "skill-evals.tmol"
    result = invoke(command, "--library", str(EXAMPLE), "--config", str(typo))
    refused(result, "--config", str(typo))


def test_a_typo_in_the_config_name_never_runs_with_the_default_cap(tmp_path: Path) -> None:
    config = tmp_path / "settings.toml"
    config.write_text("[run]\nmax_usd = 0.5\n", encoding="utf-8")
    typo = invoke("plan", "--library", str(EXAMPLE), *FAST, "--no-surface", "--format", "json",
                  "--config", str(tmp_path / "setings.toml"))
    refused(typo, "--config", "setings.toml")
    assert "10.0" not in typo.output
    result = invoke("plan", "--library", str(EXAMPLE), *FAST, "--no-surface", "--format", "json",
                    "--config", str(config))
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["cap_usd"] == 0.5


# ---- 4. --resume ---------------------------------------------------------------------------------------------

def planned(folder: Path, fake: FakeAnthropic, *args: str) -> None:
    """A run folder holding a plan and nothing else (what a resume of a run stopped before its first
    session finds), planned with a key so that nothing in it says no-credentials."""
    done = process("plan", "--library", str(EXAMPLE), "--host", "api", "--skill", TRIAGE, "--repeats", "1",
                   "--no-library-validator", "--out", str(folder), *args, fake=fake)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (folder / "plan.json").exists()


def script_triage(fake: FakeAnthropic) -> None:
    fake.default(skill(TRIAGE), text("TEST REPORT TRIAGE — x"))


def test_a_lower_cap_on_resume_is_applied_and_shown(fake: FakeAnthropic, tmp_path: Path) -> None:
    script_triage(fake)
    out = tmp_path / "run"
    planned(out, fake)
    assert json.loads((out / "plan.json").read_text())["cap_usd"] == 10.0
    done = process("run", "--library", str(EXAMPLE), "--no-library-validator", "--resume", str(out),
                   "--max-usd", "0", fake=fake)
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)
    assert results["plan"]["cap_usd"] == 0.0 and results["spend"]["cap_usd"] == 0.0
    assert results["stop_reason"] == "budget-cap" and results["attempts_finished"] == 0
    assert fake.message_requests == []
    assert "$0.00" in done.stdout and "$10.00" in done.stdout  # the resume says which cap it applies


def test_a_higher_cap_on_resume_is_the_total_the_user_consents_to(fake: FakeAnthropic, tmp_path: Path) -> None:
    script_triage(fake)
    out = tmp_path / "run"
    planned(out, fake, "--max-usd", "0")
    plan_hash_before = json.loads((out / "plan.json").read_text())
    done = process("run", "--library", str(EXAMPLE), "--no-library-validator", "--resume", str(out),
                   "--max-usd", "5", fake=fake)
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)
    assert results["plan"]["cap_usd"] == 5.0 and results["spend"]["cap_usd"] == 5.0
    assert results["attempts_finished"] > 0 and results["spend"]["usd"] <= 5.0
    # The plan on disk is the plan: the cap of one resume does not rewrite it, and every attempt carries its hash.
    assert json.loads((out / "plan.json").read_text()) == plan_hash_before
    hashes = {json.loads(line)["plan_hash"] for line in (out / "attempts.jsonl").read_text().splitlines() if line}
    assert hashes == {results["plan"]["hash"]}


KEPT_BY_RESUME = [
    ("--repeats", "3"), ("--quorum", "1"), ("--model", "claude-haiku-4-5"), ("--host", "claude-code"),
    ("--tier", "pr"), ("--concurrency", "2"), ("--max-turns", "3"), ("--timeout", "10"), ("--skill", TRIAGE),
    ("--case", "x*"), ("--neighbours",), ("--no-judge",), ("--judge-model", "m"), ("--listing-budget", "9000"),
    ("--no-early-stop",), ("--shard", "1/2"), ("--period", "2026-W01"), ("--batch",),
]


def test_a_resume_refuses_every_option_the_plan_keeps(fake: FakeAnthropic, tmp_path: Path) -> None:
    out = tmp_path / "run"
    planned(out, fake)
    before = (out / "plan.json").read_text()
    for args in [*KEPT_BY_RESUME, ("--out", str(tmp_path / "elsewhere"))]:
        result = invoke("run", "--library", str(EXAMPLE), "--no-library-validator", "--resume", str(out), *args)
        refused(result, args[0], "--resume")
        assert "--max-usd" in result.output, "the message says what a resume may change"
    assert not (out / "results.json").exists() and (out / "plan.json").read_text() == before
    assert not (tmp_path / "elsewhere").exists()


# ---- 2. text that is not Unicode, names that are not UTF-8 ---------------------------------------------------

SURROGATE_ID = "positive-\\ud83d-skip"  # as written in the JSON file: half of a surrogate pair
FIRST_TRIAGE_ID = "positive-nightly-summary-with-skip"


def with_lone_surrogate(library: Path) -> Path:
    path = library / SKILLS / TRIAGE / "evals" / "evals.json"
    path.write_text(path.read_text(encoding="utf-8").replace(f'"id": "{FIRST_TRIAGE_ID}"', f'"id": "{SURROGATE_ID}"'),
                    encoding="utf-8")
    return path


def reports_render(out: Path, tmp_path: Path) -> None:
    for fmt in ("terminal", "markdown", "junit", "html", "json"):
        shown = invoke("report", str(out), "--format", fmt)
        no_traceback(shown)
        assert shown.exit_code == 0, (fmt, shown.output)
        target = tmp_path / f"report.{fmt}"
        written = invoke("report", str(out), "--format", fmt, "--out", str(target))
        assert written.exit_code == 0 and target.read_bytes().decode("utf-8")


def test_a_lone_surrogate_holds_back_only_its_case(example_copy: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    path = with_lone_surrogate(example_copy)
    uid = f"{TRIAGE}/evals/{SURROGATE_ID}"  # the value, escaped: printable, and the same in every file
    shown = f".claude/skills/{TRIAGE}/evals/evals.json"

    for fmt in ("text", "json", "github"):
        result = invoke("validate", "--library", str(example_copy), "--no-library-validator", "--format", fmt)
        no_traceback(result)
        assert result.exit_code == 1, result.output
    findings = json.loads(invoke("validate", "--library", str(example_copy), "--no-library-validator",
                                 "--format", "json").output)["findings"]
    found = [f for f in findings if f["rule"] == "lone-surrogate"]
    assert len(found) == 1, findings
    assert (found[0]["file"], found[0]["line"], found[0]["uid"]) == (shown, line_of(path, SURROGATE_ID), uid)
    assert "\\ud83d" in found[0]["message"]
    for fmt in ("text", "json"):
        census = invoke("census", "--library", str(example_copy), "--format", fmt)
        no_traceback(census)
        assert census.exit_code == 0, census.output

    plan = invoke("plan", "--library", str(example_copy), *FAST, "--no-surface", "--format", "json",
                  "--out", str(tmp_path / "planned"), env={"ANTHROPIC_API_KEY": KEY})
    no_traceback(plan)
    assert plan.exit_code == 0, plan.output
    cases = {c["uid"]: c for c in json.loads(plan.stdout)["cases"]}
    assert cases[uid]["unrun_reason"] == "invalid-case" and "[lone-surrogate]" in cases[uid]["unrun_detail"]
    assert json.loads((tmp_path / "planned" / "plan.json").read_text(encoding="utf-8"))["cases"]
    others = [c for u, c in cases.items() if u.startswith(f"{TRIAGE}/evals/") and u != uid]
    assert others and all(c["unrun_reason"] is None for c in others)

    script_triage(fake)
    out = tmp_path / "run"
    done = process("run", "--library", str(example_copy), *FAST, "--repeats", "1", "--skill", TRIAGE,
                   "--out", str(out), fake=fake)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    results = results_of(out)
    by_uid = {c["uid"]: c for c in results["cases"]}
    assert (by_uid[uid]["state"], by_uid[uid]["reason"]) == ("UNRUN", "invalid-case")
    assert all(by_uid[u]["attempts"] for u in by_uid if u.startswith(f"{TRIAGE}/evals/") and u != uid)
    assert all(json.loads(line) for line in (out / "attempts.jsonl").read_text(encoding="utf-8").splitlines())
    reports_render(out, tmp_path)


def with_bad_names(library: Path) -> bytes:
    """A skill folder whose name is not UTF-8 (Linux allows any byte but / and NUL), beside the good ones;
    and a good skill holding a reference file with such a name."""
    folder = os.fsencode(library / SKILLS) + b"/bad\xff"
    os.makedirs(folder + b"/evals")
    with open(folder + b"/SKILL.md", "w", encoding="utf-8") as handle:
        handle.write("---\nname: bad\ndescription: Use when a folder name is not UTF-8.\n---\nBody.\n")
    with open(folder + b"/evals/evals.json", "w", encoding="utf-8") as handle:
        json.dump({"skill": "bad", "cases": [{"id": "a", "type": "should_trigger", "prompt": "hello",
                                              "expect": {"triggers": True}}]}, handle)
    reference = os.fsencode(library / SKILLS / TRIAGE) + b"/notes-\xfe.md"
    with open(reference, "w", encoding="utf-8") as handle:
        handle.write("a reference file\n")
    return folder


def test_a_skill_folder_named_in_bytes_that_are_not_utf8_is_not_read_and_the_rest_runs(
        example_copy: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    with_bad_names(example_copy)
    for fmt in ("text", "json", "github"):
        result = invoke("validate", "--library", str(example_copy), "--no-library-validator", "--format", fmt)
        no_traceback(result)
        assert result.exit_code == 1, result.output
    findings = json.loads(invoke("validate", "--library", str(example_copy), "--no-library-validator",
                                 "--format", "json").output)["findings"]
    bad = [f for f in findings if f["rule"] == "name-not-utf8"]
    assert {(f["level"], f["file"]) for f in bad} == {
        ("error", ".claude/skills/bad\\xff"), ("warning", f".claude/skills/{TRIAGE}/notes-\\xfe.md")}, bad
    assert next(f for f in bad if f["level"] == "error")["skill"] == "bad\\xff"
    for fmt in ("text", "json"):
        census = invoke("census", "--library", str(example_copy), "--format", fmt)
        no_traceback(census)
        assert census.exit_code == 0, census.output
    assert json.loads(invoke("census", "--library", str(example_copy), "--format", "json").output)

    plan = invoke("plan", "--library", str(example_copy), *FAST, "--no-surface", "--format", "json",
                  env={"ANTHROPIC_API_KEY": KEY})
    no_traceback(plan)
    assert plan.exit_code == 0, plan.output
    planned_plan = json.loads(plan.stdout)
    assert list(planned_plan["not_read"]) == ["bad\\xff"] and "[name-not-utf8]" in planned_plan["not_read"]["bad\\xff"]
    assert planned_plan["cases"] and all(c["unrun_reason"] is None for c in planned_plan["cases"]
                                         if c["uid"].startswith(f"{TRIAGE}/evals/"))

    script_triage(fake)
    out = tmp_path / "run"
    done = process("run", "--library", str(example_copy), *FAST, "--repeats", "1", "--skill", TRIAGE,
                   "--out", str(out), fake=fake)
    assert done.returncode == 0, done.stdout + done.stderr
    results = results_of(out)
    assert results["plan"]["not_read"] and all(c["attempts"] for c in results["cases"]
                                               if c["uid"].startswith(f"{TRIAGE}/evals/"))
    reports_render(out, tmp_path)
    # And when a terminal cannot print what a library holds, the output is escaped, never a crash.
    for args in (("validate", "--no-library-validator"), ("census",)):
        shown = process(*args, "--library", str(example_copy), key=False, extra_env={"PYTHONIOENCODING": "ascii"})
        assert "Traceback" not in shown.stderr, shown.stderr
        assert shown.returncode in (0, 1)


def test_eval_files_probes_and_agents_named_in_bytes_that_are_not_utf8(example_copy: Path) -> None:
    evals = os.fsencode(example_copy / SKILLS / TRIAGE / "evals")
    with open(evals + b"/more-\xff.json", "w", encoding="utf-8") as handle:
        json.dump([{"query": "triage this", "should_trigger": True}], handle)
    shutil.copytree(example_copy / SKILLS / TRIAGE / "evals" / "probes" / "rc-summary-empty-payments-suite",
                    os.fsdecode(evals + b"/probes/probe-\xfd"))
    with open(os.fsencode(example_copy / ".claude" / "agents") + b"/agent-\xfc.md", "w", encoding="utf-8") as handle:
        handle.write("---\nname: agent\n---\nAn agent.\n")
    result = invoke("validate", "--library", str(example_copy), "--no-library-validator", "--format", "json")
    no_traceback(result)
    bad = {(f["level"], f["file"], f["skill"]) for f in json.loads(result.output)["findings"]
           if f["rule"] == "name-not-utf8"}
    assert bad == {("error", f".claude/skills/{TRIAGE}/evals/more-\\xff.json", TRIAGE),
                   ("error", f".claude/skills/{TRIAGE}/evals/probes/probe-\\xfd", TRIAGE),
                   ("warning", ".claude/agents/agent-\\xfc.md", None)}, bad
    plan = invoke("plan", "--library", str(example_copy), *FAST, "--no-surface", "--format", "json",
                  env={"ANTHROPIC_API_KEY": KEY})
    no_traceback(plan)
    held = json.loads(plan.stdout)["held_back"]
    assert list(held) == [TRIAGE], "an eval file that cannot be named holds back its skill, and only it"


def test_an_argument_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    for args in (("--skill", "bad\udcff"), ("--case", "x\ud83d*"), ("--model", "m\udcfe")):
        refused(invoke("plan", "--library", str(EXAMPLE), *FAST, "--no-surface", *args), args[0])
    refused(invoke("validate", "--library", os.fsdecode(os.fsencode(tmp_path) + b"/lib\xff")), "--library")


# ---- hypothesis: hostile text, names and numbers through the loaders and the options -------------------------

HOSTILE = settings(max_examples=30, deadline=None, database=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
hostile_text = st.lists(st.one_of(surrogates, st.characters(), st.sampled_from(["\\", '"', "\n", "`", "<"])),
                        min_size=1, max_size=12).map("".join)
hostile_names = st.binary(min_size=1, max_size=8).filter(lambda b: b"/" not in b and b"\0" not in b
                                                         and b not in (b".", b".."))
non_finite = st.sampled_from(["nan", "inf", "-inf", "+nan", "+inf"])


def _encodable(value: object) -> bool:
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


@HOSTILE
@given(case_id=hostile_text, prompt=hostile_text, folder=hostile_names, file=hostile_names,
       table_key=st.sampled_from([("run", "max_usd"), ("run", "timeout_s"), ("judge", "timeout_s"),
                                  ("select", "cadence_fraction"), ("run", "rate_limit_pause_s")]),
       number=non_finite)
@example(case_id="\ud83d", prompt="\udfff", folder=b"bad\xff", file=b"\xc3", table_key=("run", "max_usd"),
         number="nan")
def test_loaders_turn_hostile_input_into_findings(case_id: str, prompt: str, folder: bytes, file: bytes,
                                                  table_key: tuple[str, str], number: str) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        library = Path(temporary) / "library"
        shutil.copytree(EXAMPLE, library, symlinks=True)
        path = library / SKILLS / TRIAGE / "evals" / "evals.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["cases"][0]["id"], data["cases"][1]["prompt"] = case_id, prompt
        path.write_text(json.dumps(data), encoding="utf-8")  # ensure_ascii: surrogates as \\uXXXX escapes
        skill_dir = os.fsencode(library / SKILLS) + b"/" + folder
        if not os.path.lexists(skill_dir):
            os.makedirs(skill_dir)
            with open(skill_dir + b"/SKILL.md", "w", encoding="utf-8") as handle:
                handle.write("---\nname: x\ndescription: y\n---\n")
        with open(os.fsencode(library / SKILLS / TRIAGE) + b"/" + file + b".md", "w", encoding="utf-8") as handle:
            handle.write("x\n")
        table, key = table_key
        settings_file = library / ".skill-evals.toml"
        settings_file.write_text(f"[{table}]\n{key} = {number}\n", encoding="utf-8")

        loaded_settings, found = settings_mod.load(settings_file, library)
        assert [f.rule for f in found] == ["settings-invalid"] and "finite" in found[0].message
        loaded, findings = load_library(library, loaded_settings, settings_file)
        findings += found + validate_mod.check_library(loaded, loaded_settings)
        gate = floor_mod.gate(findings, loaded)
        report = census_mod.compute(loaded, loaded_settings, findings)
        for rendered in (render_text(findings), render_json(findings), render_github(findings),
                         report.model_dump_json(), gate.model_dump_json(), loaded.model_dump_json()):
            rendered.encode("utf-8")  # nothing that cannot be written as UTF-8
        assert all(_encodable(case.uid) and _encodable(case.prompt) for case in loaded.cases)
        assert all(_encodable(name) for name in loaded.skills)
        assert gate.library, "the settings error stops everything; nothing else is lost silently"
        triage = {c.uid for c in loaded.cases if c.skill == TRIAGE}
        assert len(triage) >= 8, "the other cases of the skill are still read (a duplicate id holds back two)"


option_values = st.one_of(
    non_finite, st.integers(-10**30, 10**30).map(str), st.floats().map(repr), hostile_text,
    st.sampled_from(["0", "-0", "1e400", "0x10", "", " 1", "1_0", "2", "3", "5"]))
options_taking_numbers = st.sampled_from(["--max-usd", "--concurrency", "--timeout", "--max-turns", "--repeats",
                                          "--quorum", "--listing-budget", "--model", "--skill", "--case"])


@HOSTILE
@given(option=options_taking_numbers, value=option_values)
@example(option="--max-usd", value="nan")
@example(option="--max-turns", value=str(10**30))
@example(option="--timeout", value="1e400")
@example(option="--case", value="\ud83d")
def test_options_turn_hostile_values_into_usage_errors(option: str, value: str) -> None:
    result = invoke("plan", "--library", str(EXAMPLE), *FAST, "--no-surface", "--format", "json", option, value,
                    env={"ANTHROPIC_API_KEY": KEY})
    no_traceback(result)
    assert result.exit_code in (0, 2), result.output
    if result.exit_code == 2:
        assert "Error: " in result.output or "skill-evals: " in result.output, result.output
    else:
        plan = json.loads(result.stdout)
        assert math.isfinite(plan["cap_usd"]) and plan["cap_usd"] >= 0 and plan["repeats"] % 2 == 1


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run folder with a plan and results (no key: every case UNRUN no-credentials)."""
    out = tmp_path_factory.mktemp("hostile") / "run"
    done = invoke("run", "--library", str(EXAMPLE), *FAST, "--skill", TRIAGE, "--out", str(out))
    assert done.exit_code == 0, done.output
    return out


OTHER_COMMANDS = {
    "surface --listing-budget": lambda run, v: ("surface", "--library", str(EXAMPLE), "--host", "api", "--format",
                                                "json", "--listing-budget", v),
    "judge --max-usd": lambda run, v: ("judge", str(run), "--library", str(EXAMPLE), "--max-usd", v),
    "judge --batch-poll": lambda run, v: ("judge", str(run), "--library", str(EXAMPLE), "--batch-poll", v),
    "calibrate --max-usd": lambda run, v: ("calibrate", "--all", "--library", str(EXAMPLE), "--max-usd", v),
    "calibrate --concurrency": lambda run, v: ("calibrate", "--all", "--library", str(EXAMPLE), "--concurrency", v),
    "report --limit": lambda run, v: ("report", str(run), "--format", "markdown", "--limit", v),
    "run --resume --max-usd": lambda run, v: ("run", "--library", str(EXAMPLE), "--no-library-validator",
                                              "--resume", str(run), "--max-usd", v),
    "run --batch-poll": lambda run, v: ("run", "--library", str(EXAMPLE), "--no-library-validator", "--resume",
                                        str(run), "--batch-poll", v),
    "plan --out": lambda run, v: ("plan", "--library", str(EXAMPLE), *FAST, "--no-surface", "--format", "json",
                                  "--out", str(run.parent / "plans" / _one_name(v))),
    "validate --config": lambda run, v: ("validate", "--library", str(EXAMPLE), "--no-library-validator",
                                         "--config", str(run.parent / _one_name(v))),
}


def _one_name(value: str) -> str:
    """The value as one name inside the test's own folder (never `/`, `..` or an absolute path out of it)."""
    name = value.replace("/", "_").replace("\0", "_")
    return "x" if name in ("", ".", "..") else name


@HOSTILE
@given(command=st.sampled_from(sorted(OTHER_COMMANDS)), value=option_values)
@example(command="judge --batch-poll", value="nan")
@example(command="run --resume --max-usd", value="inf")
@example(command="plan --out", value="\udcff")
@example(command="validate --config", value="\ud83d")
def test_every_command_turns_hostile_values_into_usage_errors(finished_run: Path, command: str, value: str) -> None:
    result = invoke(*OTHER_COMMANDS[command](finished_run, value))
    no_traceback(result)
    assert result.exit_code in (0, 1, 2), result.output
    if result.exit_code == 2:
        assert "Error: " in result.output or "skill-evals: " in result.output, result.output


@HOSTILE
@given(name=st.one_of(hostile_text.filter(lambda s: "/" not in s and "\0" not in s), hostile_names.map(os.fsdecode)),
       create=st.booleans())
@example(name="lib\udcff", create=True)
@example(name="lib\ud83d", create=False)
def test_a_library_path_that_is_not_utf8_is_a_usage_error(name: str, create: bool) -> None:
    with tempfile.TemporaryDirectory() as temporary:
        path = os.path.join(temporary, name)
        if create and name not in (".", ".."):
            try:
                shutil.copytree(EXAMPLE / SKILLS / TRIAGE, os.path.join(path, TRIAGE))
            except (UnicodeEncodeError, OSError):
                pass  # a lone surrogate has no bytes to name a folder with
        result = invoke("validate", "--library", path, "--no-library-validator")
        no_traceback(result)
        assert result.exit_code in (0, 1, 2), result.output
        if not _encodable(path):
            assert result.exit_code == 2, result.output
            with pytest.raises(LibraryError):
                load_library(Path(path), settings_mod.Settings())
