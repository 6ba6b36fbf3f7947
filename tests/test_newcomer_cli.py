"""Issue 16, a newcomer's first hour: every documented command behaves as documented, and errors speak.

Each test names the item of the issue it covers. They run the real CLI (click's CliRunner, or `python -m runner`),
with no network and no API key, on the example library and folders made in tmp_path.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from runner.cli import main
from tests.conftest import EXAMPLE, REPO, cli, run_cli
from tests.helpers import git
from tests.report_fixtures import every_state

README = REPO / "README.md"
BROKEN_JSON = '{"finished_at": "2026-11-30",\n  oops}\n'  # not JSON at line 2, column 3
NO_DUMP = ("Traceback", "validation error", "errors.pydantic.dev", "https://", "For further information")


def docs_text() -> str:
    """The README and every page of docs/: the command reference lives in docs/cli.md, linked from the README."""
    pages = [README, *sorted((REPO / "docs").glob("*.md"))]
    return "\n\n".join(page.read_text(encoding="utf-8") for page in pages)


def run_folder(path: Path) -> Path:
    """A finished run folder: a results.json with a case in every state (the real models)."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "results.json").write_text(every_state().model_dump_json(indent=2), encoding="utf-8")
    return path


def speaks(output: str) -> None:
    """No pydantic dump, no URL, no traceback: the error is for a person."""
    for word in NO_DUMP:
        assert word not in output, (word, output)


def options_of(command: str) -> set[str]:
    names: set[str] = set()
    for param in main.commands[command].params:
        if isinstance(param, click.Option):
            names |= {name for name in param.opts + param.secondary_opts if name.startswith("--")}
    return names


# ---- 1. report RUN --previous A B ------------------------------------------------------------------------------

def test_report_previous_takes_several_folders_after_one_flag_as_the_readme_writes(tmp_path: Path) -> None:
    runs = [run_folder(tmp_path / name) for name in ("older", "old", "current")]
    readme_form = cli("report", str(runs[2]), "--previous", str(runs[0]), str(runs[1]), "--format", "markdown")
    assert readme_form.exit_code == 0, readme_form.output
    repeated = cli("report", str(runs[2]), "--previous", str(runs[0]), "--previous", str(runs[1]), "--format",
                   "markdown")
    assert repeated.exit_code == 0, repeated.output
    assert readme_form.stdout == repeated.stdout
    assert "### History: 3 run(s)" in readme_form.stdout, readme_form.stdout[-2000:]
    # Each run is named by its folder (these three finished in the same second: a time would not tell them apart).
    assert all(str(run) in readme_form.stdout for run in runs), readme_form.stdout[-2000:]
    # The flag may come last, and `--previous=A B` is the same.
    last = cli("report", str(runs[2]), "--format", "markdown", f"--previous={runs[0]}", str(runs[1]))
    assert last.exit_code == 0 and last.stdout == readme_form.stdout, last.output
    # RUN_DIR after the folders would be read as one of them: the error says so.
    misplaced = cli("report", "--previous", str(runs[0]), str(runs[1]))
    assert misplaced.exit_code == 2 and "name RUN_DIR first" in misplaced.output, misplaced.output
    # What the README and the nightly workflow write, in a real process.
    assert "--previous DIR..." in docs_text()
    done = run_cli("report", str(runs[2]), "--format", "markdown", "--previous", str(runs[0]), str(runs[1]))
    assert done.returncode == 0 and "unexpected extra argument" not in done.stderr, done.stderr


# ---- 2. which commands take --library and --config --------------------------------------------------------------

def readme_library_commands(text: str) -> tuple[set[str], set[str]]:
    """(the commands the README says take --library and --config, those it says take neither)."""
    if "All commands accept `--library PATH`" in text:
        return set(main.commands), set()
    accept = re.search(r"The commands that read a library — (.+?) — accept `--library PATH`", text, re.DOTALL)
    neither = re.search(r"((?:`[a-z-]+`\s+(?:and\s+)?)+)read run folders only and take neither", text)
    assert accept and neither, "the Command reference no longer says which commands take --library/--config"
    return set(re.findall(r"`([a-z-]+)`", accept.group(1))), set(re.findall(r"`([a-z-]+)`", neither.group(1)))


def test_readme_names_the_commands_that_take_library_and_config() -> None:
    accept, neither = readme_library_commands(docs_text())
    for command in accept:
        assert {"--library", "--config"} <= options_of(command), f"README: `{command}` takes --library and --config"
    for command in neither:
        assert not {"--library", "--config"} & options_of(command), f"README: `{command}` takes neither"
    # publish: no --config; its --library only places annotation paths (the README says so).
    assert "--config" not in options_of("publish") and "--library" in options_of("publish")
    # hosts: reads no library at all (its own sentence).
    assert "`hosts` reads no library and takes neither" in docs_text()
    assert not {"--library", "--config"} & options_of("hosts")
    assert accept | neither | {"publish", "hosts"} == set(main.commands)


# ---- 3. README's options of plan and run are the ones --help lists ----------------------------------------------

def readme_section(text: str, heading: str) -> str:
    start = text.index(f"### `skill-evals {heading}`")
    end = text.find("\n### ", start + 1)
    return text[start:end if end != -1 else None]


def documented_options(section: str, marker: str) -> set[str]:
    """The options a README list documents: the head of each bullet after `marker` (before " — "), or, where the
    list is a sentence, every option in backticks up to the end of its paragraph."""
    if marker not in section:
        return set()
    lines = section.split(marker, 1)[1].splitlines()[1:]
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].startswith("- "):
        heads = []
        for line in lines:
            if line.startswith("- "):
                heads.append(line[2:].split(" — ", 1)[0])
            elif line.strip() and not line.startswith("  "):
                break
        text = " ".join(heads)
    else:
        text = section.split(marker, 1)[1].split("\n\n", 1)[0]
    return {flag for span in re.findall(r"`([^`]*)`", text) for flag in re.findall(r"--[a-z][a-z-]*", span)}


def test_readme_option_lists_of_plan_and_run_match_their_help() -> None:
    text = docs_text()
    run_section, plan_section = readme_section(text, "run"), readme_section(text, "plan")
    shared = documented_options(run_section, "Options shared with `plan`")
    run_alone = documented_options(run_section, "Options of `run` alone:")
    plan_alone = documented_options(plan_section, "Options of `plan` alone:")
    plan, run = options_of("plan"), options_of("run")
    assert shared, "README: the list of the options shared by plan and run is gone"
    assert not shared - plan, f"README lists as shared with plan what plan rejects: {sorted(shared - plan)}"
    assert not shared - run, f"README lists as shared what run rejects: {sorted(shared - run)}"
    assert not run_alone - (run - plan), f"README: not options of run alone: {sorted(run_alone - (run - plan))}"
    assert not plan_alone - (plan - run), f"README: not options of plan alone: {sorted(plan_alone - (plan - run))}"
    common = {"--library", "--config"}  # the Command reference's first paragraph
    undocumented = {"plan": plan - common - shared - plan_alone, "run": run - common - shared - run_alone}
    assert not any(undocumented.values()), f"options the README omits: {undocumented}"


# ---- 4. run --container prints the host's folders ---------------------------------------------------------------

# The whole path through the CLI runs against the real daemon: tests/test_container.py
# (test_run_container_from_the_cli asserts the printed Results line is this machine's folder).


def test_host_paths_replace_only_whole_container_paths() -> None:
    from runner.container.launch import host_paths

    text = 'Results: /out/results.json; see /out, "/repo/x", /outer, x/out, /out-old, /repository'
    assert host_paths(text, Path("runs/t"), Path("/home/u/r")) == (
        'Results: runs/t/results.json; see runs/t, "/home/u/r/x", /outer, x/out, /out-old, /repository')


# ---- 5. select --tier pr counts the repository's changed paths too ----------------------------------------------

def test_select_pr_says_how_many_paths_changed_in_the_repository_and_in_the_library(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo / "lib", symlinks=True)
    git(repo, "init", "-q")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    for index in range(10):
        (repo / "docs").mkdir(exist_ok=True)
        (repo / "docs" / f"page{index}.md").write_text(f"page {index}\n", encoding="utf-8")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "ten pages outside the library")
    result = cli("select", "--library", str(repo / "lib"), "--tier", "pr", "--base", "HEAD~1", "--format", "text")
    assert result.exit_code == 0, result.output
    assert "10 changed path(s) in the repository, 0 of them in the library (lib)" in result.stdout, result.stdout
    # At the repository's top the two numbers are one.
    whole = cli("select", "--library", str(repo), "--tier", "pr", "--base", "HEAD~1", "--format", "text")
    assert whole.exit_code == 0 and "; 10 changed path(s): docs/page0.md" in whole.stdout, whole.stdout


# ---- 6. publish outside GitHub: one true sentence ---------------------------------------------------------------

@pytest.fixture
def outside_github(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_STEP_SUMMARY", "GITHUB_EVENT_PATH", "GITHUB_SHA",
                 "GITHUB_EVENT_NAME", "GITHUB_RUN_ID", "GITHUB_API_URL", "GITHUB_SERVER_URL", "GITHUB_WORKSPACE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.usefixtures("outside_github")
def test_publish_outside_github_says_one_true_sentence(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_folder(tmp_path / "run")
    result = cli("publish", str(run))
    assert result.exit_code == 0, result.output
    outcome = json.loads(result.stdout)
    assert not outcome["summary_written"]
    assert len(outcome["notes"]) == 1, outcome["notes"]
    note = outcome["notes"][0]
    assert "only report" not in note and "nothing was published" in note and "GITHUB_STEP_SUMMARY" in note, note
    # With a job summary file (a token-less step of a workflow), the job summary is the only report, and it is.
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    outcome = json.loads(cli("publish", str(run)).stdout)
    assert outcome["summary_written"] and len(outcome["notes"]) == 1, outcome
    assert outcome["notes"][0].endswith("this job summary is the only report")
    assert "this job summary is the only report" in summary.read_text(encoding="utf-8")


# ---- 7. option and settings errors: one line, the option or the file and key ------------------------------------

@pytest.fixture
def not_a_selection(tmp_path: Path) -> Path:
    path = tmp_path / "selection.json"
    path.write_text('{"tier": "pr"}', encoding="utf-8")
    return path


@pytest.fixture
def broken_run(tmp_path: Path) -> Path:
    folder = tmp_path / "broken-run"
    folder.mkdir()
    (folder / "plan.json").write_text(BROKEN_JSON, encoding="utf-8")
    (folder / "results.json").write_text(BROKEN_JSON, encoding="utf-8")
    return folder


LIB = ("--library", str(EXAMPLE))
BAD_OPTIONS = {
    "quorum above repeats": (("plan", *LIB, "--repeats", "1", "--quorum", "3"), "--quorum 3"),
    "even repeats": (("run", *LIB, "--repeats", "2"), "--repeats"),
    "nan timeout": (("plan", *LIB, "--timeout", "nan"), "--timeout"),
    "shard": (("run", *LIB, "--shard", "3/2"), "--shard"),
    "negative cap": (("run", *LIB, "--max-usd", "-1"), "--max-usd"),
    "no such skill": (("plan", *LIB, "--no-surface", "--skill", "nope"), "nope"),
}


@pytest.mark.parametrize("name", BAD_OPTIONS)
def test_an_option_error_names_the_option_in_one_line(name: str) -> None:
    args, named = BAD_OPTIONS[name]
    result = cli(*args)
    assert result.exit_code == 2, result.output
    speaks(result.output)
    errors = [line for line in result.output.splitlines() if line.startswith(("skill-evals:", "Error:"))]
    assert len(errors) == 1 and named in errors[0], result.output


def test_a_selection_that_is_not_one_names_the_file_and_the_key(not_a_selection: Path) -> None:
    result = cli("plan", *LIB, "--no-surface", "--selection", str(not_a_selection))
    assert result.exit_code == 2, result.output
    speaks(result.output)
    assert "--selection" in result.output and f"{not_a_selection}: not a selection" in result.output
    assert "cases: Field required" in result.output, result.output


def test_resuming_a_folder_whose_plan_is_not_json_says_where(broken_run: Path) -> None:
    result = cli("run", *LIB, "--resume", str(broken_run))
    assert result.exit_code == 2, result.output
    speaks(result.output)
    assert f"{broken_run / 'plan.json'}: not JSON at line 2, column 3" in result.output, result.output


SETTINGS_ERRORS = {
    "quorum of a tier": ("[tiers.full]\nrepeats = 1\n",
                         ":1: error[settings-invalid] tiers.full: quorum must be more than half of repeats"),
    "unknown key": ("[run]\nmax_usd = 1\nbogus = 1\n", ":3: error[settings-invalid] run.bogus: unknown key"),
    "not a table": ("run = 3\n", ":1: error[settings-invalid] run: must be a table (e.g. [run]), not an integer"),
    "not TOML": ("[run\n", ":1:5: error[settings-syntax] invalid TOML"),
}


@pytest.mark.parametrize("name", SETTINGS_ERRORS)
def test_a_settings_error_names_the_file_line_and_key(name: str, tmp_path: Path) -> None:
    text, expected = SETTINGS_ERRORS[name]
    settings = tmp_path / "settings.toml"
    settings.write_text(text, encoding="utf-8")
    result = cli("validate", *LIB, "--config", str(settings), "--no-library-validator")
    assert result.exit_code == 1, result.output
    speaks(result.output)
    assert "Value error" not in result.output and "instance of" not in result.output, result.output
    assert any(line.endswith(expected) or expected in line for line in result.output.splitlines()
               if "settings" in line), (expected, result.output)


# ---- 8. a results.json that is not JSON: the file, the line and the column --------------------------------------

@pytest.mark.parametrize("command", ["report", "publish", "merge", "judge"])
def test_a_results_file_that_is_not_json_says_line_and_column(command: str, broken_run: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GITHUB_TOKEN", raising=False)
    if command == "judge":  # a real plan.json (the judge reads it first); no attempt, so no call could be made
        planned = cli("plan", *LIB, "--no-surface", "--no-library-validator", "--host", "api", "--out",
                      str(tmp_path / "planned"))
        assert planned.exit_code == 0, planned.output
        (broken_run / "plan.json").write_text((tmp_path / "planned" / "plan.json").read_text(encoding="utf-8"),
                                              encoding="utf-8")
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-no-call")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    args = {"report": ("report", str(broken_run)), "publish": ("publish", str(broken_run)),
            "merge": ("merge", str(broken_run), "--out", str(tmp_path / "merged")),
            "judge": ("judge", str(broken_run), *LIB)}[command]
    result = cli(*args)
    assert result.exit_code == 2, result.output
    speaks(result.output)
    assert f"{broken_run / 'results.json'}: not JSON at line 2, column 3" in result.output, result.output
    assert not list(broken_run.glob("rejudged-*")), "judge refused before starting anything"


def test_a_results_file_of_another_shape_names_the_first_wrong_key(tmp_path: Path) -> None:
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "results.json").write_text('{"plan": 3}', encoding="utf-8")
    result = cli("report", str(folder))
    assert result.exit_code == 2, result.output
    speaks(result.output)
    assert f"{folder / 'results.json'}: not a results file of this runner: " in result.output, result.output


# ---- 9. run says the floor passed --------------------------------------------------------------------------------

def test_run_says_what_the_floor_found_when_it_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    result = cli("run", *LIB, "--host", "api", "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    floor = [line for line in result.stdout.splitlines() if line.startswith("Floor: ")]
    assert len(floor) == 1 and re.match(r"Floor: 0 error\(s\), \d+ warning\(s\), \d+ note\(s\)", floor[0]), floor
    assert result.stdout.index("Floor: ") < result.stdout.index("Plan ")


# ---- 10. every option says what it does; the command list is never cut; the environment is named ---------------

def test_every_option_of_every_command_has_a_description() -> None:
    missing = [f"{name} {'/'.join(param.opts)}" for name, command in main.commands.items()
               for param in command.params if isinstance(param, click.Option) and not (param.help or "").strip()]
    assert not missing, f"options without help: {missing}"


def test_docs_cli_names_every_option_of_every_command_in_its_section() -> None:
    """docs/cli.md is the command reference the README promises: each command's section (or the page's opening,
    for the options every library command takes; for `plan` and `route`, also the options they share with `run`) names
    each of its options, and the group's --version is named too."""
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    opening, *parts = re.split(r"^### ", text, flags=re.M)
    sections: dict[str, str] = {}
    for part in parts:
        if (named := re.match(r"`skill-evals ([a-z-]+)", part)) is not None:
            sections[named.group(1)] = sections.get(named.group(1), "") + part
    shared = {"plan": "run", "route": "run"}
    missing = [f"{name} {option}" for name in main.commands for option in sorted(options_of(name))
               if option != "--help" and option not in opening + sections.get(name, "")
               + sections.get(shared.get(name, name), "")]
    assert not missing, f"options docs/cli.md does not name in their command's section: {missing}"
    assert "`skill-evals --version`" in opening


@pytest.mark.parametrize("columns", ["80", "60"])
def test_the_command_list_is_not_cut_with_an_ellipsis(columns: str) -> None:
    result = CliRunner(env={"COLUMNS": columns}).invoke(main, ["--help"], terminal_width=int(columns))
    assert result.exit_code == 0
    listing = result.output.split("Commands:", 1)[1]
    assert "..." not in listing, listing
    for name, command in main.commands.items():
        assert not command.get_short_help_str(limit=40).endswith("..."), name


ENVIRONMENT = {
    "run": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "SKILL_EVALS_DISABLED", "SKILL_EVALS_VALIDATOR_SANDBOX",
            "SKILL_EVALS_BASE_IMAGE", "SKILL_EVALS_IMAGE", "CI", "GITHUB_TOKEN"),
    "plan": ("ANTHROPIC_API_KEY", "SKILL_EVALS_DISABLED", "SKILL_EVALS_VALIDATOR_SANDBOX"),
    "publish": ("GITHUB_TOKEN", "GITHUB_REPOSITORY", "GITHUB_SHA", "GITHUB_EVENT_PATH", "GITHUB_STEP_SUMMARY",
                "GITHUB_API_URL", "GITHUB_SERVER_URL", "GITHUB_RUN_ID"),
    "judge": ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL"),
    "calibrate-judge": ("ANTHROPIC_API_KEY",),
    "calibrate": ("ANTHROPIC_API_KEY", "SKILL_EVALS_DISABLED"),
    "validate": ("SKILL_EVALS_VALIDATOR_SANDBOX",),
}


@pytest.mark.parametrize("command", ENVIRONMENT)
def test_help_names_the_environment_variables_a_command_reads(command: str) -> None:
    result = cli(command, "--help")
    assert result.exit_code == 0
    for name in ENVIRONMENT[command]:
        assert re.search(rf"(?<![A-Z_]){name}(?![A-Z_])", result.output), (command, name)


# ---- a model without a price: the cap would limit nothing ------------------------------------------------------

def plan_with_key(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    import os
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["ANTHROPIC_API_KEY"] = "sk-test-not-used"  # plan sends nothing: --no-surface, no session starts
    return run_cli("plan", "--library", str(EXAMPLE), "--no-surface", "--no-library-validator", *args, cwd=tmp_path,
                   env=env)


def test_a_model_without_a_price_is_refused_when_sessions_would_start(tmp_path: Path) -> None:
    refused = plan_with_key(tmp_path, "--model", "claude-unknown-9")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    line = refused.stderr.strip().splitlines()[-1]
    assert "'claude-unknown-9' has no price" in line and '[prices."claude-unknown-9"]' in line, line
    assert "claude-sonnet-4-6" in line  # the priced models are named
    speaks(refused.stderr)
    # Priced in the settings, the same plan is made and its worst case is not zero.
    config = tmp_path / "prices.toml"
    config.write_text('[prices."claude-unknown-9"]\ninput = 3.0\noutput = 15.0\n', encoding="utf-8")
    priced = plan_with_key(tmp_path, "--model", "claude-unknown-9", "--config", str(config), "--format", "json")
    assert priced.returncode == 0, priced.stderr
    assert json.loads(priced.stdout)["estimate"]["worst_session_usd"] > 0
    # The judge's model too (when there is a judge).
    judge = tmp_path / "judge.toml"
    judge.write_text('[judge]\nmodel = "claude-judge-unknown"\n', encoding="utf-8")
    refused = plan_with_key(tmp_path, "--config", str(judge))
    assert refused.returncode == 2 and "judge model 'claude-judge-unknown' has no price" in refused.stderr
    # Without a key nothing would start: the plan is shown (every case UNRUN), not refused.
    import os
    import sys
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    shown = subprocess.run([sys.executable, "-m", "runner", "plan", "--library", str(EXAMPLE), "--no-surface",
                            "--no-library-validator", "--model", "claude-unknown-9"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr
