"""A fuzz test of everything `validate`, `census` and `plan` read (issue 28, finding 6: "inputs that hang the
required step"): 500 seeded mutations of a small real library and of its settings, each read by the three commands
in this process, under a time bound per case and a memory bound for the whole loop. The property: no exception
escapes a command, no traceback is printed, no command hangs.

The library is three skills of the bundled example library (examples/library: SKILL.md frontmatter, Aegis eval
and trigger files, a probe, references, a subagent) so that a case costs milliseconds; the mutations are what an
untrusted pull request (or a broken checkout) can do to files: flip, cut, empty or delete them, break their keys,
types and encodings, nest them deep, make strings huge, write YAML aliases, and replace files with FIFOs, sockets,
folders and symlinks inside and outside the library. The settings file (and the other files the commands read
beside the library: a quarantine list, a probe's calibration record, a marketplace manifest, .gitmodules) is
mutated the same way.

The library's own validator never runs (`--no-library-validator`; `census` does not run it), `plan` uses the api
host with no key (nothing starts), and the commands run in a temporary working folder (plan's `[cost] basis = auto`
looks for earlier runs in ./runs).

The time bound is a hang detector, not a speed assertion: a case that reads a FIFO or /dev/zero never ends, and
SIGALRM interrupts even a blocked open(). The memory bound is RLIMIT_AS at the process's size plus 1 GiB while the
loop runs (an alias bomb or /dev/zero read into memory passes it within seconds; restored afterwards).

Every failure this test found was fixed at its root and is pinned in tests/test_hostile_files.py, so it fails every
run, not only under this seed.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from runner.cli import main
from tests.conftest import EXAMPLE
from tests.limits import Hung, memory_bound, time_bound

# Another stream, to explore: FUZZ_SEED=<anything> (the suite runs this one, so that a failure repeats).
SEED = os.environ.get("FUZZ_SEED", "28")
CASES = 500
SHARDS = 4  # the cases in four tests (every fourth case each), which pytest-xdist runs side by side
CASE_SECONDS = 10  # far above a case's cost (tens of milliseconds): only a hang reaches it
MEMORY_HEADROOM = 1 << 30
KEPT_SKILLS = ("test-report-triage", "migration-planner", "release-publisher")
NO_KEY = {"ANTHROPIC_API_KEY": None, "ANTHROPIC_BASE_URL": None, "SKILL_EVALS_DISABLED": None}
COMMANDS = (("validate", "--no-library-validator"), ("census",), ("plan", "--no-library-validator", "--host", "api"))

SETTINGS = """[library]
roots = [".claude/skills"]

[run]
max_usd = 2.0
model = "claude-sonnet-4-6"
allowed_tools = ["Skill", "Read", "Glob", "Grep"]

[limits]
max_file_bytes = 1048576

[tiers.full]
repeats = 3
quorum = 2

[[case_override]]
uid = "test-report-triage/evals/a-case"
kind = "trigger"
reason = "why"

[prices."claude-sonnet-4-6"]
input = 3.0
output = 15.0

[cost]
basis = ""
"""
QUARANTINE = '[{"uid": "migration-planner/evals/x", "reason": "flaky", "expires": "2999-01-01"}]'
CALIBRATION = '{"probe": "test-report-triage/probe/rc-summary-empty-payments-suite", "records": []}'
MARKETPLACE = '{"name": "m", "plugins": [{"name": "p", "source": "./", "skills": ["./.claude/skills/migration-planner"]}]}'
GITMODULES = '[submodule "x"]\n\tpath = vendor/x\n\turl = https://example.invalid/x.git\n'
PROBE = ".claude/skills/test-report-triage/evals/probes/rc-summary-empty-payments-suite"
EXTRAS = ((".skill-evals.toml", SETTINGS, 0.5), (".skill-evals/quarantine.json", QUARANTINE, 0.15),
          (f"{PROBE}/calibration.json", CALIBRATION, 0.15), (".claude-plugin/marketplace.json", MARKETPLACE, 0.05),
          (".gitmodules", GITMODULES, 0.05))


# ---- the library and its files ----------------------------------------------------------------------------------

@pytest.fixture
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the cases are made: a RAM file system when there is one (removing 500 libraries from a disk mounted
    with `discard` costs tens of seconds), else pytest's temporary folder."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(prefix="skill-evals-fuzz-", dir=shm) as folder:
            yield Path(folder)
    else:
        yield tmp_path_factory.mktemp("fuzz")


@pytest.fixture
def small_library(scratch: Path) -> Path:
    base = scratch / "base" / "library"
    shutil.copytree(EXAMPLE, base, symlinks=True)
    for folder in (base / ".claude" / "skills").iterdir():
        if folder.name not in KEPT_SKILLS:
            shutil.rmtree(folder)
    return base


def files_of(library: Path) -> list[Path]:
    """The files a mutation may target: every file and link the commands may read (the validator script is never
    run here), in a stable order."""
    found = []
    for dirpath, dirnames, filenames in os.walk(library, followlinks=False):
        dirnames.sort()
        found += [Path(dirpath) / name for name in sorted(filenames) if name != "validate-skills.py"]
    return found


def pick(rng: random.Random, library: Path, suffixes: tuple[str, ...] = ()) -> Path | None:
    files = [f for f in files_of(library) if f.is_file() and not f.is_symlink()
             and (not suffixes or f.name.endswith(suffixes))]
    return rng.choice(files) if files else None


def replace(path: Path) -> None:
    """Remove whatever is at `path` (a file, a link, a folder) so that something else can be put there."""
    if path.is_symlink() or path.is_file() or path.exists() and not path.is_dir():
        path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)


# ---- values ----------------------------------------------------------------------------------------------------

def deep(rng: random.Random) -> tuple[str, str]:
    depth = rng.choice([63, 65, 200, 990, 2_000, 100_000])
    return "[" * depth, "]" * depth


def odd_json_value(rng: random.Random) -> Any:
    return rng.choice([None, True, -1, 0, 1e308, -1e308, 10**30, "", "x" * rng.choice([10, 2_000, 300_000]),
                       [], {}, [None], {"": {}}, "\ud83d", "../../../../etc/passwd", "\x00", "€" * 1000])


def odd_json_text(rng: random.Random) -> str:
    opening, closing = deep(rng)
    return rng.choice([opening + closing, "9" * 5_000, "1e999999", "-0", '"\\ud800"', "NaN", "Infinity",
                       json.dumps("x" * rng.choice([100_000, 1_100_000]))])


def odd_toml_value(rng: random.Random) -> str:
    opening, closing = deep(rng)
    return rng.choice([opening + closing, "nan", "inf", "-inf", "9" * 5_000, "1979-05-27T07:32:00Z", "{}", "[]",
                       "true", '"' + "x" * 200_000 + '"', "'\\ud800'", "0x_1", '"""\n' + "y" * 1000 + '"""',
                       '{ a = { b = { c = [1, "2", 3.0] } } }', "-1", "100000000000000000000000"])


def odd_yaml_value(rng: random.Random) -> str:
    opening, closing = deep(rng)
    return rng.choice([opening + closing, "&a [*a]", "&a {k: *a}", "!!python/object:os.system ls", "!!binary aGk=",
                       "2026-02-30", "0b", "<<: *nope", "[1, 2", "'unterminated", "|\n  block\n  text", "~",
                       "x" * rng.choice([2_000, 300_000]), "\"\\ud83d\"", "{a: 1, a: 2}", "*undefined"])


def alias_bomb(rng: random.Random) -> list[str]:
    width, levels = rng.choice([(9, 9), (10, 6), (2, 30), (3, 3)])
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels + 1)]
    return lines


# ---- mutations: each changes the library in place and says what it did ---------------------------------------

def flip_bytes(rng: random.Random, library: Path) -> str:
    path = pick(rng, library)
    if path is None:
        return "flip: nothing to flip"
    data = bytearray(path.read_bytes())
    for _ in range(rng.randint(1, 8)):
        if data:
            data[rng.randrange(len(data))] = rng.randrange(256)
    path.write_bytes(bytes(data))
    return f"flip bytes of {path.relative_to(library)}"


def truncate(rng: random.Random, library: Path) -> str:
    path = pick(rng, library)
    if path is None:
        return "truncate: nothing"
    data = path.read_bytes()
    path.write_bytes(data[:rng.randrange(len(data) + 1)] if rng.random() < 0.8 else b"")
    return f"truncate {path.relative_to(library)}"


def non_utf8(rng: random.Random, library: Path) -> str:
    path = pick(rng, library)
    if path is None:
        return "non-utf8: nothing"
    data = path.read_bytes()
    at = rng.randrange(len(data) + 1)
    noise = rng.choice([b"\xff\xfe", b"\xc0\xaf", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf", b"\xe2\x82"])
    path.write_bytes(data[:at] + noise + data[at:])
    return f"non-UTF-8 bytes in {path.relative_to(library)}"


def _walk_json(value: Any) -> Iterator[tuple[Any, Any]]:
    """(container, key) for every member and item, iteratively."""
    stack = [value]
    while stack:
        node = stack.pop()
        keys = list(node) if isinstance(node, dict) else range(len(node)) if isinstance(node, list) else []
        for key in keys:
            yield node, key
            if isinstance(node[key], (dict, list)):
                stack.append(node[key])


def json_structure(rng: random.Random, library: Path) -> str:
    path = pick(rng, library, (".json",))
    if path is None:
        return "json: nothing"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError:
        return f"json: {path.relative_to(library)} is no longer JSON"
    spots = list(_walk_json(data))
    if not spots:
        path.write_text(odd_json_text(rng), encoding="utf-8")
        return f"json: replaced {path.relative_to(library)}"
    container, key = rng.choice(spots)
    action = rng.choice(["delete", "wrong-type", "raw", "duplicate", "huge"])
    if action == "delete" and isinstance(container, dict):
        del container[key]
    elif action == "wrong-type":
        container[key] = odd_json_value(rng)
    elif action == "huge":
        container[key] = "x" * rng.choice([100_000, 1_100_000])
    marker = "\u2063MARK\u2063"
    if action in ("raw", "duplicate"):
        container[key] = marker
    text = json.dumps(data, indent=2, ensure_ascii=rng.random() < 0.5)
    quoted = json.dumps(marker, ensure_ascii=False) if marker in text else json.dumps(marker)
    if action == "raw":
        text = text.replace(quoted, odd_json_text(rng), 1)
    elif action == "duplicate" and isinstance(container, dict):
        text = text.replace(quoted, f'"x", {json.dumps(key)}: "duplicate"', 1)
    elif action == "duplicate":
        text = text.replace(quoted, '"x", "y"', 1)
    path.write_text(text, encoding="utf-8", errors="surrogatepass")
    return f"json {action} at {key!r} in {path.relative_to(library)}"


def frontmatter_structure(rng: random.Random, library: Path) -> str:
    path = pick(rng, library, ("SKILL.md",))
    if path is None:
        return "frontmatter: nothing"
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    try:
        end = lines.index("---", 1)
    except ValueError:
        end = 1
    action = rng.choice(["aliases", "aliases", "delete", "duplicate", "value", "value"])
    at = rng.randint(1, max(1, end))
    if action == "aliases":
        lines[at:at] = alias_bomb(rng)
    elif action == "delete" and end > 1:
        del lines[rng.randint(1, end - 1)]
    elif action == "duplicate" and end > 1:
        line = rng.randint(1, end - 1)
        lines.insert(line, lines[line])
    else:
        key = rng.choice(["name", "description", "disable-model-invocation", "allowed-tools", "metadata", "x"])
        lines[at:at] = [f"{key}: {odd_yaml_value(rng)}"]
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return f"frontmatter {action} in {path.relative_to(library)}"


TOML_KEYS = ("[library] roots", "[library] skills", "[run] max_usd", "[run] repeats", "[limits] max_file_bytes",
             "[cost] basis", "[validator] command", "[listing] budget_chars", "[[trigger_set]]", "[tiers.pr] repeats",
             "[prices.\"m\"] input", "[select] settings_paths", "[probes] run_verdicts", "[judge] enabled")
ODD_PATHS = ("/dev/zero", "/dev/null", "/proc/self/environ", "/", "..", "../..", "/etc/passwd", ".git/config",
             "missing/folder", ".skill-evals.toml", ".claude/skills", "nul\x00byte", "fifo", "a" * 5_000)


def settings_structure(rng: random.Random, library: Path) -> str:
    path = library / ".skill-evals.toml"
    if not path.is_file() or path.is_symlink():
        replace(path)
        path.write_text(SETTINGS, encoding="utf-8")
    lines = path.read_text(encoding="utf-8", errors="surrogateescape").split("\n")
    action = rng.choice(["delete", "duplicate", "value", "key", "path", "path"])
    if action == "delete" and lines:
        del lines[rng.randrange(len(lines))]
    elif action == "duplicate" and lines:
        line = rng.randrange(len(lines))
        lines.insert(line, lines[line])
    elif action == "value":
        keyed = [i for i, line in enumerate(lines) if "=" in line]
        if keyed:
            line = rng.choice(keyed)
            lines[line] = lines[line].split("=", 1)[0] + "= " + odd_toml_value(rng)
    else:
        table, _, key = rng.choice(TOML_KEYS).partition(" ")
        if action == "path":
            if rng.random() < 0.3:
                os.mkfifo(library / "fifo") if not os.path.lexists(library / "fifo") else None
            value = json.dumps(rng.choice(ODD_PATHS))
            if table == "[[trigger_set]]":
                lines += ["[[trigger_set]]", 'skill = "migration-planner"', f"path = {value}"]
            else:
                lines += [table, f"{key or 'roots'} = {value if 'roots' not in key else '[' + value + ']'}"]
        else:
            lines += [table, f"{key or 'x'} = {odd_toml_value(rng)}"]
    path.write_text("\n".join(lines), encoding="utf-8", errors="surrogateescape")
    return f"settings {action}"


def special_file(rng: random.Random, library: Path) -> str:
    """A file replaced by a FIFO, a socket, a folder, or nothing at all."""
    candidates = files_of(library) + [library / name for name, _, _ in EXTRAS]
    path = rng.choice(candidates)
    kind = rng.choice(["fifo", "fifo", "socket", "folder", "missing", "empty"])
    replace(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "socket":
        server = socket.socket(socket.AF_UNIX)
        try:
            server.bind(str(path))
        except OSError:  # a path too long for a socket address: a FIFO instead
            os.mkfifo(path)
        finally:
            server.close()
    elif kind == "folder":
        path.mkdir()
        (path / "inner.json").write_text("{}", encoding="utf-8")
    elif kind == "empty":
        path.write_bytes(b"")
    return f"{path.relative_to(library)} is now {kind}"


def symlink(rng: random.Random, library: Path, outside: Path) -> str:
    """A file (or a skill folder) replaced by a link inside the library, outside it, to a device, or to nothing."""
    candidates = files_of(library) + [library / name for name, _, _ in EXTRAS]
    folders = [p for p in (library / ".claude" / "skills").iterdir() if p.is_dir() and not p.is_symlink()]
    path = rng.choice(candidates + folders)
    inside = [p for p in files_of(library) if p != path]
    target = rng.choice([
        "/dev/zero", "/dev/zero", "/dev/urandom", "/dev/null", "/proc/self/environ", "/etc/passwd",
        str(outside / "fifo"), str(outside / "big.json"), str(outside), str(library), str(library / ".git" / "config"),
        str(path), "does-not-exist", str(rng.choice(inside)) if inside else "/dev/zero",
        os.path.relpath(rng.choice(inside), path.parent) if inside else "..", ".."])
    replace(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    os.symlink(target, path)
    return f"{path.relative_to(library)} -> {target}"


Mutation = Callable[[random.Random, Path], str]


def mutations(outside: Path) -> list[tuple[Mutation, int]]:
    """Each mutation with its weight."""
    def linked(rng: random.Random, library: Path) -> str:
        return symlink(rng, library, outside)
    return [(flip_bytes, 3), (truncate, 2), (non_utf8, 2), (json_structure, 6), (frontmatter_structure, 5),
            (settings_structure, 6), (special_file, 3), (linked, 3)]


def make_case(rng: random.Random, base: Path, library: Path, outside: Path) -> list[tuple[str, str]]:
    """The case's library at `library`, and (mutation, what it did) for each mutation applied."""
    shutil.copytree(base, library, symlinks=True)
    for name, text, chance in EXTRAS:
        if rng.random() < chance:
            (library / name).parent.mkdir(parents=True, exist_ok=True)
            (library / name).write_text(text, encoding="utf-8")
    chosen = mutations(outside)
    functions, weights = [m for m, _ in chosen], [w for _, w in chosen]
    done = []
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        mutation = rng.choices(functions, weights)[0]
        done.append((mutation.__name__, mutation(rng, library)))
    return done


# ---- the property ------------------------------------------------------------------------------------------

def _short(text: str) -> str:
    """A traceback with its long lines cut (a mutation's huge string would bury it)."""
    return "\n".join(line if len(line) <= 200 else line[:200] + " ..." for line in text.splitlines()[-40:])


def problem_of(result: Result) -> str | None:
    """Why a command's result breaks the property, or None."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        return _short("".join(traceback.format_exception(result.exception)))
    if "Traceback" in result.output:
        return _short(result.output)
    if result.exit_code not in (0, 1, 2):
        return f"exit {result.exit_code}: {result.output[-500:]}"
    return None


def run_case(runner: CliRunner, library: Path, rng: random.Random) -> list[str]:
    problems = []
    config = ["--config", str(library / ".skill-evals.toml")] if (
        rng.random() < 0.1 and os.path.lexists(library / ".skill-evals.toml")) else []
    # Text (rich's tables) or JSON (the models' serialisation), in turn: both render what was read.
    fmt = ["--format", rng.choice(["text", "json"])]
    for command in COMMANDS:
        result = runner.invoke(main, [*command, "--library", str(library), *config, *fmt], env=NO_KEY)
        problem = problem_of(result)
        if problem:
            problems.append(f"{command[0]}: {problem}")
    return problems


@pytest.mark.parametrize("shard", range(SHARDS))
def test_fuzzed_libraries_and_settings_never_crash_nor_hang(shard: int, small_library: Path, scratch: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    tmp_path = scratch / "cases"
    tmp_path.mkdir()
    outside = tmp_path / "outside"
    outside.mkdir()
    os.mkfifo(outside / "fifo")
    (outside / "big.json").write_text('{"cases": [' + ",".join(['{"id": "x"}'] * 50_000) + "]}", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # plan's [cost] basis = auto reads ./runs: this test's own, empty
    runner = CliRunner()
    failures: list[str] = []
    kinds: dict[str, int] = {}
    with memory_bound(MEMORY_HEADROOM):
        for index in range(shard, CASES, SHARDS):
            rng = random.Random(f"{SEED}:{index}")
            library = tmp_path / f"case-{index}"
            done = make_case(rng, small_library, library, outside)
            for name, _ in done:
                kinds[name] = kinds.get(name, 0) + 1
            try:
                with time_bound(CASE_SECONDS):
                    problems = run_case(runner, library, rng)
            except Hung as exc:
                problems = [f"hang: {exc}"]
            except MemoryError:
                problems = ["MemoryError outside a command"]
            if problems:
                failures.append(f"case {index} ({'; '.join(what for _, what in done)}):\n" + "\n".join(problems))
            shutil.rmtree(library, ignore_errors=True)
    assert not failures, (f"{len(failures)} of shard {shard}'s {len(range(shard, CASES, SHARDS))} case(s) failed; "
                          "the first:\n\n" + "\n\n".join(failures[:3]))
    # The generator reached every kind of mutation (a test that mutated nothing would pass too).
    assert len(kinds) >= 8, kinds
