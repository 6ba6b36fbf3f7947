"""Untrusted settings are data, not control (issue 28, findings 3 and 4).

With `--untrusted-settings` (the GitHub Action always passes it) the repository's `.skill-evals.toml` comes from the
code under review. runner.corpus.trust.POLICY decides, key by key, what it may set; every key it refuses is named in
one line and the command exits 2 before anything is started or sent. The pure tests hold the policy against the
whole Settings model and each attack; the CLI tests run the real `python -m runner` against a fake Messages API that
records every request, and assert that none was made.

And when the validator is off for a trusted reason (no --untrusted-settings), `validate` and every report say so, with
the settings file and line (rule `validator-disabled`), never a silent "0 error(s)".
"""

from __future__ import annotations

import html as html_text
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from rich.console import Console

from runner.cli import context
from runner.corpus import trust
from runner.corpus.settings import Settings
from runner.report import html, junit, markdown, terminal
from runner.results.build import Results
from runner.testing.fake_anthropic import FakeAnthropic
from tests.conftest import EXAMPLE, cli, fake_env, line_of, run_cli
from tests.helpers import KEY, results_of, skill_evals_run

SETTINGS = ".skill-evals.toml"
# The attacks of the issue, as a pull request writes them.
ATTACK = """\
[run]
max_usd = 100000
allowed_tools = ["Skill", "Read", "Bash", "Write"]

[validator]
enabled = false

[tiers.full]
repeats = 1001
quorum = 501

[prices."claude-sonnet-4-6"]
input = 0.0
output = 0.0
"""


def settings_of(text: str) -> Settings:
    return Settings.model_validate(tomllib.loads(text))


def refused(text: str, root: Path, cap: float | None = trust.RUNNER_CAP_USD) -> list[trust.Refusal]:
    return trust.check(settings_of(text), trust.Bounds(root=root, cap_usd=cap), text)


# ---- the policy covers the whole model ---------------------------------------------------------------------

def test_every_key_of_the_settings_has_exactly_one_rule() -> None:
    """A key added to Settings without a rule fails here (and `check` would raise for it): nobody can add a setting
    the repository under review controls without deciding whether it may."""
    leaves = trust.leaf_patterns()
    assert len(leaves) > 60
    for leaf in leaves:
        path = tuple(leaf.split("."))
        matching = [p for p in trust.POLICY if trust._matches(p, path)]
        assert len(matching) == 1, (leaf, matching)
    for pattern in trust.POLICY:
        assert any(trust._matches(pattern, tuple(leaf.split("."))) for leaf in leaves), f"{pattern} names no key"
    assert all(rule.why for rule in trust.POLICY.values())


def test_the_configuration_page_says_what_each_key_may_do() -> None:
    """docs/configuration.md, "Untrusted settings", names every key of the policy (the table a user reads)."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = page.split("## Untrusted settings", 1)[1]
    assert [p for p in trust.POLICY if f"`{p}`" not in section] == []


# ---- each attack, refused by name ------------------------------------------------------------------------

ATTACKS = [
    ('[prices."claude-sonnet-4-6"]\ninput = 0.0\noutput = 0.0\n',
     ['[prices."claude-sonnet-4-6"] input = 0', '[prices."claude-sonnet-4-6"] output = 0'], "runner's table"),
    ('[prices."my.model"]\ninput = 9.0\noutput = 9.0\n',
     ['[prices."my.model"] input = 9', '[prices."my.model"] output = 9'], "runner's table"),
    ('[run]\nallowed_tools = ["Skill", "Read", "Bash"]\n', ['[run] allowed_tools'], "Bash is not read-only"),
    ('[run]\nallowed_tools = ["Skill", "Write", "Edit"]\n', ['[run] allowed_tools'], "Write, Edit are not read-only"),
    ('[run]\nallowed_tools = ["Skill", "Read", "Task"]\n', ['[run] allowed_tools'], "Task is not read-only"),
    ('[run]\nallowed_tools = ["Read", "Grep"]\n', ['[run] allowed_tools'], "without Skill"),
    ("[run]\nmax_usd = 100000\n", ["[run] max_usd = 100000"], "above the cap of $10.00"),
    ("[tiers.pr]\nrepeats = 1001\nquorum = 501\n", ["[tiers.pr] repeats = 1001"], "above 11"),
    ("[tiers.cadence]\nrepeats = 13\nquorum = 7\n", ["[tiers.cadence] repeats = 13"], "above 11"),
    ("[validator]\nenabled = false\n", ["[validator] enabled = false"], "part of the floor"),
    ("[validator]\ntimeout_s = 100000\n", ["[validator] timeout_s = 100000"], "above 300"),
    ("[run]\ndisabled = true\n", ["[run] disabled = true"], "SKILL_EVALS_DISABLED"),
    ("[judge]\nenabled = false\n", ["[judge] enabled = false"], "--no-judge"),
    ("[judge]\nrequire_calibration = true\n", ["[judge] require_calibration = true"], "guards nothing"),
    ('[run]\ncli_path = "evil.sh"\n', ['[run] cli_path = "evil.sh"'], "executed with the API key"),
    ('[run]\nsession_namespace = "off"\n', ['[run] session_namespace = "off"'], "runner's choice"),
    ("[run]\nhost_max_retries = 50\n", ["[run] host_max_retries = 50"], "retry"),
    ("[judge]\nmax_retries = 50\n", ["[judge] max_retries = 50"], "retry"),
    ("[run]\nconcurrency = 5000\n", ["[run] concurrency = 5000"], "above 16"),
    ("[run]\ntimeout_s = 86400\n", ["[run] timeout_s = 86400"], "above 900"),
    ("[run]\nrate_limit_pause_s = 1e9\n", ["[run] rate_limit_pause_s"], "above 300"),
    ("[run]\nmax_output_tokens = 100000000\n", ["[run] max_output_tokens = 100000000"], "above 128000"),
    ("[judge]\ntimeout_s = 86400\n[judge.calibration]\nmin_agreement = 0.1\n",
     ["[judge] timeout_s = 86400", "[judge.calibration] min_agreement = 0.1"], "below 0.9"),
    ("[limits]\nmax_file_bytes = 1000000000\nmax_probe_lines = 4000\n",
     ["[limits] max_file_bytes = 1000000000", "[limits] max_probe_lines = 4000"], "seed 000 rule 5"),
    ("[listing]\nbudget_chars = 1000000\nmax_description_chars = 100000\n",
     ["[listing] budget_chars = 1000000", "[listing] max_description_chars = 100000"], "--listing-budget"),
    ('[library]\ntemplates = ["_*", "*"]\n', ['[library] templates = ["_*", "*"]'], 'adds "*"'),
    ('[library]\nagents = "../../outside"\n', ['[library] agents = "../../outside"'], "not inside the repository"),
    ('[library]\nroots = ["/etc"]\n', ['[library] roots = ["/etc"]'], "not inside the repository"),
    ('[cost]\nbasis = "/tmp/elsewhere"\n', ['[cost] basis = "/tmp/elsewhere"'], "not inside the repository"),
    ('[[trigger_set]]\nskill = "a"\npath = "a.json"\n[[trigger_set]]\nskill = "b"\npath = "../b.json"\n',
     ['[[trigger_set]] path (entry 2) = "../b.json"'], "not inside the repository"),
    ("[select]\nsettings_paths = []\n", ["[select] settings_paths = []"], 'leaves out ".skill-evals.toml"'),
    ('[probes]\nrun_verdicts = ["floor"]\n', ['[probes] run_verdicts = ["floor"]'], 'leaves out "window"'),
]


@pytest.mark.parametrize(("text", "names", "why"), ATTACKS, ids=[a[1][0] for a in ATTACKS])
def test_each_key_that_is_control_is_refused_by_name(text: str, names: list[str], why: str, tmp_path: Path) -> None:
    found = refused(text, tmp_path)
    shown = [r.shown() for r in found]
    assert len(found) == len(names), shown
    for name, line in zip(names, shown):
        assert line.startswith(name) and " (line " in line, (name, shown)
    assert any(why in line for line in shown), (why, shown)
    # Each refusal says where the key is.
    for refusal in found:
        assert refusal.line is not None and text.splitlines()[refusal.line - 1].strip() != ""


def test_what_the_repository_may_set_is_accepted(tmp_path: Path) -> None:
    """Data about the library, and tightened bounds: nothing refused."""
    (tmp_path / "skills").mkdir()
    text = """\
[library]
roots = ["skills"]
agents = "skills/../agents"
templates = []

[validator]
command = "python3 scripts/check.py"
enabled = true
timeout_s = 60

[limits]
max_file_bytes = 100000
max_probe_lines = 30

[listing]
budget_chars = 4000
max_description_chars = 1000

[classify]
refusal_id_prefixes = ["refuse-"]

[[case_override]]
uid = "a/evals/x"
kind = "refusal"
reason = "a halt is a refusal"

[[trigger_set]]
skill = "a"
path = "skills/a/queries.json"

[run]
host = "api"
model = "claude-haiku-4-5"
max_turns = 12
timeout_s = 600
concurrency = 8
max_usd = 2.5
disabled = false
allowed_tools = ["Skill", "Read"]
host_max_retries = 1
early_stop = false
baseline = true

[cost]
basis = "runs/earlier"

[judge]
model = "claude-opus-4-8"
max_retries = 0
require_calibration = false

[judge.calibration]
min_agreement = 0.95
max_false_pass = 0.01

[tiers.pr]
repeats = 5
quorum = 4

[select]
settings_paths = [".skill-evals.toml", ".skill-evals/", "ci/"]

[probes]
run_verdicts = ["window", "ceiling", "floor"]
"""
    assert refused(text, tmp_path) == []
    assert trust.effective_cap(settings_of(text), 10.0) == 2.5


def test_the_repository_may_lower_the_cap_never_raise_it(tmp_path: Path) -> None:
    assert trust.effective_cap(settings_of(""), 3.0) == 3.0
    assert trust.effective_cap(settings_of("[run]\nmax_usd = 0.5\n"), 3.0) == 0.5
    assert trust.effective_cap(settings_of("[run]\nmax_usd = 0\n"), 3.0) == 0.0
    assert refused("[run]\nmax_usd = 20\n", tmp_path, cap=50.0) == []
    [above] = refused("[run]\nmax_usd = 20\n", tmp_path, cap=5.0)
    assert above.shown() == ("[run] max_usd = 20 (line 2: above the cap of $5.00: the repository may lower the cap, "
                             "never raise it: it comes from --max-usd, the action's max-usd input)")
    # Where the cap is not known (`validate`), [run] max_usd is left to `run` and `plan`.
    assert refused("[run]\nmax_usd = 100000\n", tmp_path, cap=None) == []


def test_untrusted_cap_of_a_command(example_copy: Path) -> None:
    """The cap `run` and `plan` use under --untrusted-settings: --max-usd, else the runner's $10, lowered by the
    repository's [run] max_usd."""
    (example_copy / SETTINGS).write_text("[run]\nmax_usd = 0.5\n", encoding="utf-8")
    loaded = context.load(example_copy, None)
    assert context.untrusted_cap(loaded, 3.0) == 0.5
    with pytest.raises(SystemExit) as refused_above:  # 0.5 is above a cap of 0.2: an attempt to raise it
        context.untrusted_cap(loaded, 0.2)
    assert refused_above.value.code == 2
    (example_copy / SETTINGS).write_text("# no cap here\n", encoding="utf-8")
    assert context.untrusted_cap(context.load(example_copy, None), None) == trust.RUNNER_CAP_USD


def test_keys_are_shown_as_the_file_writes_them() -> None:
    assert trust.key_shown(("run", "max_usd")) == "[run] max_usd"
    assert trust.key_shown(("prices", "claude-3.5", "input")) == '[prices."claude-3.5"] input'
    assert trust.key_shown(("tiers", "pr", "repeats")) == "[tiers.pr] repeats"
    assert trust.key_shown(("judge", "calibration", "min_agreement")) == "[judge.calibration] min_agreement"
    assert trust.key_shown(("trigger_set", 0, "path")) == "[[trigger_set]] path (entry 1)"


def test_lines_of_keys_in_every_way_toml_writes_them() -> None:
    text = """\
# comment
[judge]
enabled = true

[run]   # the run
max_usd = 5
validator.enabled = false

[validator]
  enabled = false
tiers = { pr = { repeats = 7, quorum = 4 } }
[[trigger_set]]
path = "a"
[[trigger_set]]
path = "b"
"""
    assert trust.locate(text, ("run", "max_usd")) == 6
    assert trust.locate(text, ("validator", "enabled")) == 10  # the [validator] table's, not [judge]'s
    assert trust.locate(text, ("run", "validator", "enabled")) == 7
    assert trust.locate(text, ("validator", "tiers", "pr", "repeats")) == 11  # the inline table's line
    assert trust.locate(text, ("trigger_set", 1, "path")) == 15
    assert trust.locate(text, ("prices", "x", "input")) is None


# ---- through the real CLI: refused in one line, exit 2, nothing sent -------------------------------------

@pytest.mark.parametrize("command", ["run", "plan"])
def test_the_cli_refuses_the_attacks_by_name_before_any_request(command: str, example_copy: Path,
                                                                tmp_path: Path) -> None:
    (example_copy / SETTINGS).write_text(ATTACK, encoding="utf-8")
    out = tmp_path / "out"
    with FakeAnthropic() as fake:
        done = run_cli(command, "--library", str(example_copy), "--out", str(out), "--max-usd", "0.05",
                       "--no-library-validator", "--untrusted-settings", env=fake_env(fake, KEY), cwd=example_copy,
                       timeout=300)
        requests = list(fake.requests)
    assert done.returncode == 2, done.stdout + done.stderr
    assert requests == [], "a request reached the API"
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    line = lines[0]
    assert line.startswith(f"skill-evals: --untrusted-settings: {SETTINGS} sets keys the repository under review "
                           "may not set: ")
    path = example_copy / SETTINGS
    for key, needle in (("[run] max_usd = 100000", "max_usd"), ("[run] allowed_tools", "allowed_tools"),
                        ("[validator] enabled = false", "enabled"), ("[tiers.full] repeats = 1001", "repeats"),
                        ('[prices."claude-sonnet-4-6"] input = 0', "input"),
                        ('[prices."claude-sonnet-4-6"] output = 0', "output")):
        assert re.search(re.escape(key) + rf"[^;]* \(line {line_of(path, needle)}: ", line), (key, line)
    assert "above the cap of $0.05" in line and "Bash, Write are not read-only" in line
    assert not out.exists() and done.stdout == ""
    assert KEY not in done.stdout + done.stderr


def test_validate_refuses_them_too_the_action_s_required_step(example_copy: Path) -> None:
    """The action's validate step passes --untrusted-settings: a pull request adding `[validator] enabled = false`
    fails the required step (exit 2) instead of passing it with "0 error(s)". The cap is not known there:
    `run` holds [run] max_usd against it."""
    (example_copy / "scripts").mkdir(exist_ok=True)
    (example_copy / "scripts" / "validate-skills.py").write_text("import sys\nprint('broken')\nsys.exit(1)\n",
                                                                 encoding="utf-8")
    (example_copy / SETTINGS).write_text(ATTACK, encoding="utf-8")
    result = cli("validate", "--library", str(example_copy), "--untrusted-settings")
    assert result.exit_code == 2
    assert "[validator] enabled = false (line 6: " in result.stderr
    assert "[tiers.full] repeats = 1001" in result.stderr and "[run] allowed_tools" in result.stderr
    assert "max_usd" not in result.stderr


def test_the_cap_the_plan_gets_is_the_runner_s_lowered_by_the_settings(example_copy: Path) -> None:
    (example_copy / SETTINGS).write_text("[run]\nmax_usd = 0.5\n", encoding="utf-8")
    lowered = cli("plan", "--library", str(example_copy), "--no-surface", "--format", "json", "--max-usd", "3",
                  "--untrusted-settings", "--no-library-validator")
    assert lowered.exit_code == 0, lowered.output + lowered.stderr
    assert json.loads(lowered.stdout)["cap_usd"] == 0.5
    trusted = cli("plan", "--library", str(example_copy), "--no-surface", "--format", "json", "--max-usd", "3",
                  "--no-library-validator")
    assert json.loads(trusted.stdout)["cap_usd"] == 3.0


# ---- the validator off for a trusted reason: said, never silent -------------------------------------------

def disable_the_validator(library: Path) -> int:
    """A failing library validator, switched off by trusted settings; the line of `enabled = false`."""
    (library / "scripts").mkdir(exist_ok=True)
    (library / "scripts" / "validate-skills.py").write_text("import sys\nprint('broken')\nsys.exit(1)\n",
                                                            encoding="utf-8")
    (library / SETTINGS).write_text("[judge]\nenabled = true\n\n[validator]\nenabled = false\n", encoding="utf-8")
    return line_of(library / SETTINGS, "enabled = false")


def test_validate_says_the_validator_is_off_with_file_and_line(example_copy: Path) -> None:
    line = disable_the_validator(example_copy)
    text = cli("validate", "--library", str(example_copy))
    assert text.exit_code == 0, text.output
    assert f"{SETTINGS}:{line}: warning[validator-disabled] the library's own validator " \
           "(`scripts/validate-skills.py`) is switched off by [validator] enabled = false" in text.stdout
    assert re.search(r"^0 error\(s\), [1-9]\d* warning\(s\)", text.stdout, re.M), text.stdout
    github = cli("validate", "--library", str(example_copy), "--format", "github")
    assert f"::warning file={SETTINGS},line={line},title=skill-evals validator-disabled::" in github.stdout


def test_every_report_says_the_validator_is_off(example_copy: Path, fake: FakeAnthropic, tmp_path: Path) -> None:
    """A run whose trusted settings switch the validator off: its output, results.json and every report (terminal,
    Markdown, HTML, JUnit) carry the finding with the settings file and line."""
    line = disable_the_validator(example_copy)
    out = tmp_path / "run"
    done = skill_evals_run(fake, out, "--host", "api", "--repeats", "1", "--skill", "test-report-triage",
                           library=example_copy)
    assert done.returncode == 0, done.stdout + done.stderr
    note = f"{SETTINGS}:{line}: [validator-disabled] the library's own validator"
    assert note in done.stdout
    results = results_of(out)
    assert [n[:len(note)] for n in results["plan"]["floor_notes"]] == [note]
    typed = Results.model_validate(results)
    for rendered in (markdown.render(typed), html.render(typed), junit.render(typed)):
        assert note in html_text.unescape(rendered)
    console = Console(record=True, width=400)
    terminal.render(typed, console)
    assert note in console.export_text()
    report = run_cli("report", str(out), "--format", "markdown")
    assert report.returncode == 0 and note in html_text.unescape(report.stdout)


# ---- the settings as a commit holds them (--settings-commit: the action's pull request base) ------------------

def commit_all(repo: Path, message: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1"}
    for args in (["add", "-A"], ["commit", "-q", "--allow-empty", "-m", message], ["rev-parse", "HEAD"]):
        done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                              env=os.environ | env, timeout=60)
    return done.stdout.strip()


def test_the_settings_of_a_commit_not_the_working_tree_s(tmp_path: Path) -> None:
    """A repository whose library is a folder of it: the commit's file at that folder, the defaults where the commit
    has none, the working tree never read; a commit that is not there, or a link in place of the file, refused."""
    from runner.corpus import committed

    repo = tmp_path / "repo"
    library = repo / "lib"
    shutil.copytree(EXAMPLE, library, symlinks=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, timeout=60)
    without = commit_all(repo, "no settings")
    (library / SETTINGS).write_text("[run]\nmax_turns = 3\n", encoding="utf-8")
    base = commit_all(repo, "settings")
    (library / SETTINGS).write_text("[run]\nmax_turns = 9\n[validator]\nenabled = false\n", encoding="utf-8")
    (library / "pr.toml").symlink_to(SETTINGS)

    loaded = context.load(library, None, base)
    assert loaded.settings.run.max_turns == 3 and loaded.settings.validator.enabled
    assert loaded.settings_shown == f"{base[:12]}:lib/{SETTINGS}"
    assert loaded.settings_file is not None and loaded.settings_file.read_text() == "[run]\nmax_turns = 3\n"
    none = context.load(library, None, without)
    assert none.settings == Settings() and none.settings_file is None
    with pytest.raises(committed.CommitError, match="no such commit"):
        committed.read(library, "0" * 40)
    with pytest.raises(committed.CommitError, match="give a commit"):
        committed.read(library, "--output=/tmp/x")
    (library / SETTINGS).unlink()
    (library / SETTINGS).symlink_to("pr.toml")
    linked = commit_all(repo, "a link")
    with pytest.raises(committed.CommitError, match="not a regular file"):
        committed.read(library, linked)
    # Its findings and refusals name the file as the commit holds it, with its lines.
    (library / SETTINGS).unlink()
    (library / SETTINGS).write_text("[run]\nmax_turns = 3\nconcurrency = 999\n", encoding="utf-8")
    bad = commit_all(repo, "too many")
    result = cli("validate", "--library", str(library), "--settings-commit", bad, "--untrusted-settings")
    assert result.exit_code == 2
    assert f"{bad[:12]}:lib/{SETTINGS} sets keys" in result.stderr and "[run] concurrency = 999 (line 3: " in \
        result.stderr


def test_a_pull_request_cannot_quarantine_the_cases_it_breaks(tmp_path: Path) -> None:
    """The quarantine list is control too: quarantined cases never fail a required lane. With --settings-commit
    (what the action passes on a pull request) `plan` applies the base commit's list, not the one the pull request
    added; without it, the working tree's, as before; --quarantine names another list."""
    repo = tmp_path / "repo"
    library = repo / "lib"
    shutil.copytree(EXAMPLE, library, symlinks=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, timeout=60)
    base = commit_all(repo, "no quarantine list")
    uid = "test-report-triage/evals/positive-nightly-summary-with-skip"
    (library / ".skill-evals").mkdir(exist_ok=True)
    entry = [{"uid": uid, "reason": "flaky, honest", "date": "2026-12-01"}]
    (library / ".skill-evals" / "quarantine.json").write_text(json.dumps(entry), encoding="utf-8")
    commit_all(repo, "the pull request quarantines the case it breaks")

    def quarantined(*args: str) -> list[str]:
        result = cli("plan", "--library", str(library), "--host", "api", "--no-surface", "--no-library-validator",
                     "--format", "json", *args)
        assert result.exit_code == 0, result.output
        return [q["uid"] for q in json.loads(result.stdout)["quarantine"]]

    assert quarantined() == [uid]
    assert quarantined("--settings-commit", base) == []
    assert quarantined("--settings-commit", base, "--quarantine",
                       str(library / ".skill-evals" / "quarantine.json")) == [uid]
