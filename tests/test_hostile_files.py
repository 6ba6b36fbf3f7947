"""Files that hang or exhaust the required step (issue 28, finding 6), each refused in one clear line.

An untrusted pull request writes the library and its settings; a user (or a workflow) names more files with
options. Before: an alias bomb in a SKILL.md frontmatter expanded without bound (validate, census, plan, run), a
FIFO `.skill-evals.toml` hung every command, a `.skill-evals.toml` linked to /dev/zero was read until memory ran out,
2,000 nested arrays in it raised RecursionError, and `--config /dev/zero` and `--selection /dev/zero` raised
MemoryError. Now every file is read within runner.corpus.bounded's bounds: a regular file only (stat'ed before it is
opened, opened without blocking, checked again on the descriptor), of a bounded size, nested to a bounded depth; a
frontmatter's aliases are counted before they are expanded.

Part 1 runs each attack through the real CLI (`python -m runner`) with its address space bounded (tests.limits) and
a hang guard: the attacks never end, so any finite guard tells them apart from a refusal (each takes 1-3 s here).
Part 2 pins each reader in process; part 3 pins the failures the fuzz test (tests/test_fuzz_inputs.py) found, so
they fail every run and not only under its seed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from runner.cli import main
from runner.corpus import bounded, frontmatter, jsonfile
from runner.corpus import settings as settings_mod
from runner.results import modelfile
from tests.conftest import EXAMPLE, fake_env, line_of
from tests.limits import limit_cli_memory, memory_bound, time_bound

SKILLS = Path(".claude") / "skills"
MIGRATION = SKILLS / "migration-planner"
TRIAGE = SKILLS / "test-report-triage"
HANG_GUARD_S = 60
NO_KEY = {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None, "SKILL_EVALS_DISABLED": None}
COMMANDS = {"validate": ("validate", "--no-library-validator"), "census": ("census",),
            "plan": ("plan", "--no-library-validator", "--host", "api", "--no-surface")}


def bounded_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`python -m runner ARGS` with no key, its memory bounded; TimeoutExpired (a failure) when it hangs."""
    return subprocess.run([sys.executable, "-m", "runner", *args], env=fake_env(None, None), cwd=cwd,
                          capture_output=True, text=True, timeout=HANG_GUARD_S, preexec_fn=limit_cli_memory,
                          check=False)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr[-3000:]
    assert "MemoryError" not in proc.stderr and "RecursionError" not in proc.stderr, proc.stderr[-3000:]


def one_line(text: str, *needles: str) -> str:
    """The one line of `text` that holds every needle."""
    lines = [line for line in text.splitlines() if all(needle in line for needle in needles)]
    assert len(lines) == 1, f"{needles} in:\n{text[-3000:]}"
    return lines[0]


def alias_bomb(skill_md: Path) -> int:
    """Ten levels of nine aliases each (9^10 values once expanded) at the top of the frontmatter; the line of the
    last level, the field that expands the most."""
    lines = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    text = skill_md.read_text(encoding="utf-8")
    skill_md.write_text(text.replace("---\n", "---\n" + "\n".join(lines) + "\n", 1), encoding="utf-8")
    return line_of(skill_md, "l9: &l9")


# ---- 1. through the real CLI ------------------------------------------------------------------------------------

@pytest.mark.parametrize("command", ["validate", "census", "plan"])
def test_an_alias_bomb_in_a_frontmatter_holds_back_its_skill_only(command: str, example_copy: Path) -> None:
    line = alias_bomb(example_copy / MIGRATION / "SKILL.md")
    proc = bounded_cli(*COMMANDS[command], "--library", str(example_copy), cwd=example_copy)
    no_traceback(proc)
    where = f"{MIGRATION / 'SKILL.md'}:{line}"
    if command == "validate":
        assert proc.returncode == 1, proc.stdout
        assert "alias" in one_line(proc.stdout, where, "error[frontmatter-yaml]")
        assert "checked 5 skill(s)" in proc.stdout  # the rest of the library loads
    elif command == "plan":
        assert proc.returncode == 0, proc.stderr
        assert "alias" in one_line(proc.stdout, "migration-planner: " + where)
        assert "Held back by the floor: 1 skill(s)" in proc.stdout
    else:
        assert proc.returncode == 0 and "Validation: 1 error(s)" in proc.stdout, proc.stdout


@pytest.mark.parametrize("command", ["validate", "census", "plan"])
def test_a_fifo_settings_file_is_refused_without_being_opened(command: str, example_copy: Path) -> None:
    os.mkfifo(example_copy / ".skill-evals.toml")  # no writer ever comes: an open() for reading blocks forever
    proc = bounded_cli(*COMMANDS[command], "--library", str(example_copy), cwd=example_copy)
    no_traceback(proc)
    if command == "census":
        assert proc.returncode == 0 and "Validation: 1 error(s)" in proc.stdout, proc.stdout
        return
    line = one_line(proc.stdout, ".skill-evals.toml:1:", "settings-unreadable")
    assert "a FIFO (named pipe), not a regular file" in line
    assert proc.returncode == 1  # plan: a library-level error stops it, nothing is planned
    if command == "plan":
        assert "the floor failed" in proc.stderr


def test_settings_linked_to_dev_zero_are_refused_unread(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").symlink_to("/dev/zero")
    proc = bounded_cli(*COMMANDS["validate"], "--library", str(example_copy), cwd=example_copy)
    no_traceback(proc)
    assert proc.returncode == 1
    assert "a character device, not a regular file" in one_line(proc.stdout, ".skill-evals.toml:1:",
                                                                  "settings-unreadable")


@pytest.mark.parametrize("option", ["--config", "--selection"])
def test_an_option_naming_dev_zero_is_a_usage_error(option: str, example_copy: Path) -> None:
    proc = bounded_cli(*COMMANDS["plan"], "--library", str(example_copy), option, "/dev/zero", cwd=example_copy)
    no_traceback(proc)
    assert proc.returncode == 2, proc.stderr
    assert "/dev/zero: a character device, not a regular file" in one_line(proc.stderr, "Error:", option)


def nest(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.parametrize("where", ["settings", "evals.json", "frontmatter"])
def test_two_thousand_nested_arrays_are_one_finding(where: str, example_copy: Path) -> None:
    """The TOML case raised RecursionError before; the JSON and YAML parsers (json's, libyaml's) already stopped
    at their own limits, and now every reader stops at bounded.MAX_NESTING with the same words."""
    if where == "settings":
        path, line = example_copy / ".skill-evals.toml", 1
        path.write_text(f"[run]\nallowed_tools = {nest(2_000)}\n", encoding="utf-8")
    elif where == "evals.json":
        path = example_copy / MIGRATION / "evals" / "evals.json"
        data = json.loads(path.read_text(encoding="utf-8"))
        data["cases"][0]["assertions"] = "NESTED"
        path.write_text(json.dumps(data, indent=2).replace('"NESTED"', nest(2_000)), encoding="utf-8")
        line = line_of(path, "[[[[")
    else:
        path = example_copy / MIGRATION / "SKILL.md"
        path.write_text(path.read_text(encoding="utf-8").replace("---\n", f"---\nx: {nest(2_000)}\n", 1),
                        encoding="utf-8")
        line = 2
    proc = bounded_cli(*COMMANDS["validate"], "--library", str(example_copy), cwd=example_copy)
    no_traceback(proc)
    assert proc.returncode == 1
    shown = path.relative_to(example_copy).as_posix()
    assert f"nests deeper than {bounded.MAX_NESTING} levels" in one_line(proc.stdout, f"{shown}:{line}:")


# ---- 2. each reader, in process ---------------------------------------------------------------------------------

def invoke(*args: str) -> Result:
    """The real CLI in process, bounded: a hang or a runaway read fails the test instead of stopping the suite."""
    with memory_bound(1 << 30), time_bound(30):
        return CliRunner().invoke(main, list(args), catch_exceptions=True, env=NO_KEY)


def clean(result: Result) -> None:
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output


def test_read_bytes_refuses_what_is_not_a_regular_file_before_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "link").symlink_to(tmp_path / "fifo")
    (tmp_path / "folder").mkdir()
    expected = {"fifo": "a FIFO (named pipe)", "link": "a FIFO (named pipe)", "folder": "a folder"}
    for name, kind in expected.items():
        with time_bound(10), pytest.raises(bounded.Refused, match=re.escape(kind)):
            bounded.read_bytes(tmp_path / name, 100)
    with pytest.raises(bounded.Refused, match="a character device"):
        bounded.read_bytes(Path("/dev/zero"), 100)


def test_read_bytes_stops_at_its_bound_when_the_size_is_not_known() -> None:
    """/proc files say they are 0 bytes long and are not: the read itself stops at the bound."""
    with pytest.raises(bounded.Refused, match="over 10 bytes") as refused:
        bounded.read_bytes(Path("/proc/self/status"), 10)
    assert refused.value.too_large


def test_a_file_over_its_bound_is_refused_by_its_size(tmp_path: Path) -> None:
    (tmp_path / "big").write_bytes(b"x" * 101)
    with pytest.raises(bounded.Refused, match="101 bytes, over the 100-byte limit"):
        bounded.read_bytes(tmp_path / "big", 100)
    assert bounded.read_bytes(tmp_path / "big", 101) == b"x" * 101


@pytest.mark.parametrize("depth", [bounded.MAX_NESTING + 1, 100, 2_000])
def test_settings_nested_past_the_bound_are_a_settings_error(depth: int, tmp_path: Path) -> None:
    path = tmp_path / ".skill-evals.toml"
    path.write_text(f"[run]\nallowed_tools = {nest(depth)}\n", encoding="utf-8")
    settings, findings = settings_mod.load(path, tmp_path)
    assert [(f.rule, f.line) for f in findings] == [("settings-syntax", 1)]
    assert "nests deeper than" in findings[0].message
    assert settings == settings_mod.Settings()
    path.write_text('[run]\nallowed_tools = ["Skill", "Read"]\n', encoding="utf-8")  # within the bound: read
    settings, findings = settings_mod.load(path, tmp_path)
    assert findings == [] and settings.run.allowed_tools == ["Skill", "Read"]


@pytest.mark.parametrize("depth", [bounded.MAX_NESTING + 1, 100, 900])
def test_json_nested_past_the_bound_is_a_finding_at_its_line(depth: int) -> None:
    """Below the interpreter's limit json.loads reads it, and the schema check and the loader would walk it."""
    text = '{\n  "cases": [\n    ' + nest(depth) + "\n  ]\n}\n"
    doc, problem = jsonfile.parse(text, "evals.json")
    assert doc is None and problem is not None
    assert (problem.rule, problem.line) == ("json-syntax", 3)
    assert jsonfile.parse('{"cases": ' + nest(bounded.MAX_NESTING - 1) + "}", "evals.json")[1] is None


def frontmatter_of(fields: str) -> tuple[frontmatter.Frontmatter | None, object]:
    return frontmatter.parse(f"---\nname: x\n{fields}---\nbody\n", "SKILL.md")


def test_an_alias_bomb_is_refused_before_it_is_expanded() -> None:
    bomb = ["l0: &l0 [" + ", ".join(["lol"] * 9) + "]"]
    bomb += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 10)]
    with memory_bound(1 << 30), time_bound(10):
        parsed, problem = frontmatter_of("\n".join(bomb) + "\n")
    assert parsed is None and problem is not None
    assert problem.rule == "frontmatter-yaml" and problem.line == 12  # l9, the field that expands the most
    assert "aliases expand to" in problem.message
    # A few aliases are read, as the host reads them: Claude Code 2.1.332 resolves aliases in a project skill's
    # frontmatter (measured through `surface`: a `description: *d` was listed with the anchored text).
    parsed, problem = frontmatter_of("x-desc: &d Plan a migration\ndescription: *d\ntools: &t [Read, Grep]\n"
                                     "also: *t\n")
    assert problem is None and parsed is not None
    assert parsed.fields["description"] == "Plan a migration" and parsed.fields["also"] == ["Read", "Grep"]


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    for fields in ("a: &a [1, *a]\n", "a: &a {k: *a}\n"):
        parsed, problem = frontmatter_of(fields)
        assert parsed is None and problem is not None and "inside its own anchor" in problem.message


@pytest.mark.parametrize("depth", [bounded.MAX_NESTING, 100, 900])
def test_a_frontmatter_nested_past_the_bound_is_a_finding(depth: int) -> None:
    parsed, problem = frontmatter_of(f"x: {nest(depth)}\n")
    assert parsed is None and problem is not None and "nests deeper than" in problem.message


def test_a_selection_that_is_a_fifo_is_refused_unopened(tmp_path: Path) -> None:
    from runner.plan.select import Selection
    os.mkfifo(tmp_path / "selection.json")
    with time_bound(10), pytest.raises(modelfile.Unreadable, match="a FIFO"):
        modelfile.read(tmp_path / "selection.json", Selection, "a selection", bounded.OPTION_FILE_MAX_BYTES)


def test_repository_files_beside_the_library_are_read_within_bounds(example_copy: Path) -> None:
    """The quarantine list, a probe's calibration record and .gitmodules are the repository's too: a FIFO there is
    a usage error (the list), leaves the probe uncalibrated (the record) or is passed over (.gitmodules), never a
    hang."""
    (example_copy / ".gitmodules").symlink_to("/dev/zero")
    clean(invoke("validate", "--no-library-validator", "--library", str(example_copy)))
    (example_copy / ".skill-evals").mkdir()
    os.mkfifo(example_copy / ".skill-evals" / "quarantine.json")
    result = invoke(*COMMANDS["plan"], "--library", str(example_copy))
    clean(result)
    assert result.exit_code == 2 and "quarantine.json: cannot read the quarantine list: a FIFO" in result.output
    (example_copy / ".skill-evals" / "quarantine.json").unlink()
    probe = example_copy / TRIAGE / "evals" / "probes" / "rc-summary-empty-payments-suite"
    os.mkfifo(probe / "calibration.json")
    result = invoke(*COMMANDS["plan"], "--library", str(example_copy))
    clean(result)
    assert result.exit_code == 0  # the probe's calibration is unreadable: it stays uncalibrated, nothing hangs


def test_a_cost_basis_naming_a_device_falls_back_to_the_defaults(example_copy: Path) -> None:
    (example_copy / ".skill-evals.toml").write_text('[cost]\nbasis = "/dev/zero"\n', encoding="utf-8")
    result = invoke(*COMMANDS["plan"], "--library", str(example_copy))
    clean(result)
    assert result.exit_code == 0
    assert "[cost] basis /dev/zero could not be read: a character device, not a regular file" in result.output


def test_labels_and_run_folders_named_by_arguments_are_read_within_bounds(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "labels.jsonl")
    result = invoke("calibrate-judge", str(tmp_path / "labels.jsonl"), "--library", str(EXAMPLE))
    clean(result)
    assert result.exit_code == 2 and "labels.jsonl: cannot read the labels file: a FIFO" in result.output
    run = tmp_path / "run"
    run.mkdir()
    (run / "results.json").symlink_to("/dev/zero")
    result = invoke("report", str(run))
    clean(result)
    assert result.exit_code == 2 and "results.json: a character device, not a regular file" in result.output


# ---- 3. what the fuzz test found ----------------------------------------------------------------------------------

# A NUL byte: pathlib answers False for the other keys already; `[library] agents` raised ValueError.
UNUSABLE = [(key, path) for key in ("roots", "agents", "trigger_set", "basis")
            for path in ("a" * 300, "skills/" + "b" * 256)] + [("agents", "nul\x00byte")]


@pytest.mark.parametrize("key,path", UNUSABLE)
def test_a_path_no_file_system_takes_is_a_finding_not_a_crash(key: str, path: str, example_copy: Path) -> None:
    """A name past 255 bytes makes every stat raise ENAMETOOLONG, where a missing file answers False (fuzz:
    `[[trigger_set]] path = "aaa..."` crashed every command)."""
    value = json.dumps(path)
    settings = {"roots": f"[library]\nroots = [{value}]\n", "agents": f"[library]\nagents = {value}\n",
                "trigger_set": f'[[trigger_set]]\nskill = "migration-planner"\npath = {value}\n',
                "basis": f"[cost]\nbasis = {value}\n"}[key]
    (example_copy / ".skill-evals.toml").write_text(settings, encoding="utf-8")
    for command in ("plan",) if key == "basis" else ("validate", "plan"):  # only plan reads [cost] basis
        result = invoke(*COMMANDS[command], "--library", str(example_copy))
        clean(result)
        assert "not a usable path" in result.output, result.output


@pytest.mark.parametrize("field", ["source", "skills"])
def test_a_plugin_path_no_file_system_takes_is_a_finding(field: str, example_copy: Path) -> None:
    """Fuzz: a marketplace entry whose source was a 1 MB string crashed every command."""
    entry = {"name": "p", "source": "./", "skills": ["./.claude/skills/migration-planner"]}
    entry[field] = "x" * 1_000 if field == "source" else ["./" + "x" * 1_000]
    (example_copy / ".claude-plugin").mkdir()
    (example_copy / ".claude-plugin" / "marketplace.json").write_text(
        json.dumps({"name": "m", "plugins": [entry]}), encoding="utf-8")
    result = invoke(*COMMANDS["validate"], "--library", str(example_copy))
    clean(result)
    assert "not a usable path" in one_line(result.output, ".claude-plugin/marketplace.json:1: error")
