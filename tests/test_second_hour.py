"""A user's second hour (issue 30): a finished run is never written over, option mistakes are refused before any
work, Ctrl-C ends as documented and says how to go on.

Every run here is keyless (no session starts), through the real CLI (`python -m runner`) on a copy of the bundled
example library, as the README's quick start runs it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner.cli import folders
from runner.execute import rundir
from tests.conftest import cli, fake_env, run_cli

# What the floor, the surface audit and the plan print first: none of it may appear before a usage error.
WORK_OUTPUT = ("Floor:", "Surface", "Plan tier", "Cases selected")


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def keyless_run(library: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return run_cli("run", "--library", str(library), "--out", str(out), env=fake_env(None, None))


def test_the_readme_run_twice_into_one_folder_keeps_the_first_results(tmp_path: Path, example_copy: Path) -> None:
    out = tmp_path / "run"
    first = keyless_run(example_copy, out)
    assert first.returncode == 0, first.stdout + first.stderr
    # What to do without a key comes before the plan's arithmetic; the last line says how to read the results.
    assert first.stdout.index("Set ANTHROPIC_API_KEY") < first.stdout.index("Plan tier"), first.stdout
    assert first.stdout.rstrip().splitlines()[-1].startswith(f"Read them: `skill-evals report {out}`"), first.stdout
    before = snapshot(out)
    assert "results.json" in before and "plan.json" in before
    # Every rendering of the keyless run says why nothing ran and what to do (the HTML page said nothing of it).
    for fmt in ("terminal", "markdown", "html", "junit"):
        shown = cli("report", str(out), "--format", fmt, "--out", str(tmp_path / f"report.{fmt}"))
        assert shown.exit_code == 0, shown.output
        page = (tmp_path / f"report.{fmt}").read_text(encoding="utf-8")
        assert "no ANTHROPIC_API_KEY reached this run, so no session started" in page, (fmt, page[:3000])
    html = (tmp_path / "report.html").read_text(encoding="utf-8")  # uids wrap at their separators, not mid-word
    assert "word-break:break-all" not in html and "<code>dependency-<wbr>upgrade-<wbr>reviewer/<wbr>evals/<wbr>" in html

    again = keyless_run(example_copy, out)
    assert again.returncode == 2, again.stdout + again.stderr
    assert f"skill-evals run --resume {out}" in again.stderr and "a new folder" in again.stderr, again.stderr
    assert not any(word in again.stdout + again.stderr for word in WORK_OUTPUT), again.stdout
    assert snapshot(out) == before  # not one byte of the finished run changed

    merged = run_cli("merge", str(out), "--out", str(out), env=fake_env(None, None))
    assert merged.returncode == 2 and "holds a run (plan.json)" in merged.stderr, merged.stderr
    assert snapshot(out) == before


def test_a_folder_of_other_files_is_refused_and_a_stopped_start_is_reused(tmp_path: Path, example_copy: Path) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "todo.txt").write_text("mine\n", encoding="utf-8")
    refused = keyless_run(example_copy, notes)
    assert refused.returncode == 2 and "is not empty (1 entry, e.g. 'todo.txt')" in refused.stderr, refused.stderr
    assert sorted(p.name for p in notes.iterdir()) == ["todo.txt"]

    stopped = tmp_path / "stopped"  # what a start stopped before its plan leaves: the lock, no run
    stopped.mkdir()
    (stopped / "run.lock").write_text("12345\n", encoding="utf-8")
    reused = keyless_run(example_copy, stopped)
    assert reused.returncode == 0, reused.stdout + reused.stderr
    assert (stopped / "results.json").is_file()


def test_a_folder_another_process_runs_on_is_refused_before_the_floor(tmp_path: Path, example_copy: Path) -> None:
    """A live run holds run.lock: a second `run --out` or `run --resume` on its folder is refused at once."""
    import fcntl

    live = tmp_path / "live"
    live.mkdir()
    fd = os.open(live / "run.lock", os.O_RDWR | os.O_CREAT, 0o644)
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, sys, time\n"
                               f"fd = open({str(live / 'run.lock')!r}, 'r+')\n"
                               "fcntl.lockf(fd, fcntl.LOCK_EX)\nfd.write('4242\\n'); fd.flush()\n"
                               "print('held', flush=True)\ntime.sleep(120)\n"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        os.close(fd)
        for args in (["--out", str(live)], ["--resume", str(live)]):
            second = run_cli("run", "--library", str(example_copy), *args, env=fake_env(None, None))
            assert second.returncode == 2, second.stdout + second.stderr
            assert "another skill-evals process (pid 4242) is running on this run folder" in second.stderr
            assert not any(word in second.stdout + second.stderr for word in WORK_OUTPUT), second.stdout
    finally:
        holder.kill()
        holder.wait()
    with open(live / "run.lock", "r+") as handle:  # the probe left the lock free once its holder ended
        fcntl.lockf(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)


@pytest.mark.parametrize(("command", "args", "says"), [
    ("run", ["--tier", "pr"], "--tier pr needs --base REF"),
    ("plan", ["--case", "no-such-skill/*"], "--case no-such-skill/*: matches no case of the library"),
    ("run", ["--case", "*/evals/typo-*"], "matches no case of the library"),
    ("run", ["--skill", "no-such-skill"], "no such skill(s) in the library: no-such-skill"),
    ("select", ["--case", "nothing"], "matches no case of the library"),
    ("plan", ["--shard", "3/2"], "--shard takes i/n with 1 <= i <= n"),
    ("run", ["--repeats", "3", "--quorum", "5"], "k must be more than half of N"),
])
def test_option_mistakes_are_refused_before_the_floor(tmp_path: Path, example_copy: Path, command: str,
                                                      args: list[str], says: str) -> None:
    out = ["--out", str(tmp_path / "run")] if command == "run" else []
    result = run_cli(command, "--library", str(example_copy), *args, *out, env=fake_env(None, None))
    assert result.returncode == 2, result.stdout + result.stderr
    assert says in result.stderr, result.stderr
    assert not any(word in result.stdout + result.stderr for word in WORK_OUTPUT), result.stdout
    assert not (tmp_path / "run").exists()


def test_ctrl_c_before_any_session_exits_130_and_the_folder_takes_the_same_command_again(tmp_path: Path, example_copy: Path) -> None:
    """Ctrl-C while the library's validator runs (the floor, before any session): exit 130 with one line, not
    click's `Aborted!` and 1; the same command then runs into the same folder."""
    out = tmp_path / "run"
    started = tmp_path / "validator-started"
    script = example_copy / "scripts" / "validate-skills.py"
    original = script.read_text(encoding="utf-8")
    script.write_text(f"import pathlib, time\npathlib.Path({str(started)!r}).touch()\ntime.sleep(60)\n",
                      encoding="utf-8")
    process = subprocess.Popen([sys.executable, "-m", "runner", "run", "--library", str(example_copy), "--out", str(out)],
                               env=fake_env(None, None), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
    deadline = time.monotonic() + 120
    while not started.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    stdout, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stdout + stderr
    assert "Aborted!" not in stderr and "skill-evals: interrupted" in stderr, stderr
    assert "Traceback" not in stderr

    script.write_text(original, encoding="utf-8")
    again = keyless_run(example_copy, out)
    assert again.returncode == 0, again.stdout + again.stderr


def test_the_cli_knows_the_run_folders_files_by_their_names() -> None:
    """runner.cli.folders names a run's files without importing runner.execute.rundir (the SDK: seconds)."""
    assert folders.RUN_MARKERS == (rundir.PLAN, rundir.ATTEMPTS, rundir.RESULTS)
    assert rundir.LOCK in folders.STARTING_FILES
    from runner.cli import incontainer
    assert {incontainer.COMMITTED_SETTINGS, incontainer.COMMITTED_QUARANTINE, "selection.json"} \
        <= folders.STARTING_FILES


def test_the_package_metadata_uses_a_license_expression() -> None:
    """setuptools deprecates `project.license` as a TOML table (builds stop after 2027-02-18): an SPDX expression
    (PEP 639) with the file named, and a setuptools that reads it."""
    import tomllib

    pyproject = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text(encoding="utf-8"))
    assert pyproject["project"]["license"] == "Apache-2.0"
    assert pyproject["project"]["license-files"] == ["LICENSE"]
    assert "setuptools>=77" in pyproject["build-system"]["requires"]  # the first to read PEP 639 expressions


@pytest.mark.parametrize("command", ["run", "plan", "select"])
def test_an_empty_skills_folder_is_no_library_as_an_empty_folder_is(tmp_path: Path, command: str) -> None:
    """`.claude/skills` with no skill in it: one line and exit 2, as for an empty folder, not a plan of nothing."""
    library = tmp_path / "repo"
    (library / ".claude" / "skills").mkdir(parents=True)
    result = run_cli(command, "--library", str(library), env=fake_env(None, None), cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "no skills found" in result.stderr and not result.stdout, result.stdout + result.stderr
    assert not (tmp_path / "runs").exists()


def test_calibrate_judge_prints_rates_as_percentages_and_an_unmeasured_one_as_such() -> None:
    """Only PASS labels: no item can be a false PASS. The line said Python's `None`; it says why there is no rate."""
    from runner.cli.calibrating import rates
    from runner.judge.agreement import Rates

    measured = Rates(items=2, agreement=1.0, false_pass_rate=None, false_fail_rate=0.0, judge_error_rate=0.0)
    assert rates(measured) == ("agreement 100.0%, false PASS n/a (no item to measure it on), false FAIL 0.0%, "
                               "JUDGE-ERROR 0.0%")


def test_the_census_header_and_counts_read_as_sentences(example_copy: Path) -> None:
    """The census names the library by its folder and where its skills were read; counts agree with their nouns, no
    space stands before a semicolon, and no line ends on a colon with nothing after it."""
    text = cli("census", "--library", str(example_copy)).output
    lines = text.splitlines()
    assert lines[0].startswith("Census of library/, skills read from .claude/skills"), lines[0]
    skills = next(line for line in lines if line.startswith("Skills: "))
    assert skills.startswith("Skills: 5 skill folders: 5 skills, 0 templates; 1 manual-only;"), skills
    assert skills.endswith("; 1 subagent defined"), skills
    assert not [line for line in lines if " ;" in line or line.endswith(": ")]
    assert "Pattern breaks: 0 refusal-like id(s) typed should_not_trigger (run as no_trigger)\n" in text
