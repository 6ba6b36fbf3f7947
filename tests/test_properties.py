"""Property-based tests: random bytes and random JSON into every loader give findings, never exceptions.

The requirement (issue): "A property-based test (hypothesis) feeds random bytes and random JSON into
every loader: findings, never exceptions." Each test below pins one property of one loader (or of the
whole pipeline: load -> validate -> census -> CLI) over generated input. Inputs that once broke a
property (huge integers in JSON and TOML, YAML values PyYAML cannot construct, a probe count too big
for an int) are pinned with `@example`, so a regression fails every run, not only the runs where the
generator happens to find it again.

No mocks: every test reads real files with the real loaders. Library tests copy the bundled example
library into a fresh `tempfile.TemporaryDirectory()` per example (hypothesis reuses function-scoped
pytest fixtures such as tmp_path across examples, so they cannot be used for per-example state).
"""

from __future__ import annotations

import copy
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from runner.cli import main
from runner.corpus import frontmatter, jsonfile, schema_check
from runner.corpus import settings as settings_mod
from runner.corpus.findings import Finding, render_json
from runner.corpus.loader import load_library
from runner.floor import census, validate

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "library"

# database=None: the tests write nothing beside the checkout (no .hypothesis/ folder); failures are
# reproducible from the printed falsifying example and the @example pins.
PURE = settings(max_examples=200, database=None)
FILES = settings(max_examples=60, deadline=None, database=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
CLI = settings(max_examples=25, deadline=None, database=None,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


# ---- strategies -------------------------------------------------------------------------------

# Keys often contain the two characters JSON pointers must escape.
json_keys = st.text(max_size=12) | st.text(alphabet="~/01a", max_size=6)
json_scalars = (st.none() | st.booleans() | st.integers()
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=40))
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(json_keys, children, max_size=6),
    max_leaves=30,
)


@st.composite
def near_json(draw: st.DrawFn) -> str:
    """Valid JSON with one small edit: a character inserted or deleted, or a trailing comma added."""
    text = json.dumps(draw(json_values), indent=draw(st.sampled_from([None, 2])))
    position = draw(st.integers(0, len(text)))
    edit = draw(st.sampled_from(["insert", "delete", "trailing-comma"]))
    if edit == "insert":
        return text[:position] + draw(st.sampled_from(list('[]{}:,"\\ \n0-.eEtfn'))) + text[position:]
    if edit == "delete":
        return text[:position] + text[position + 1:]
    closer = max(text.rfind("]"), text.rfind("}"))
    return text if closer < 0 else text[:closer] + ",\n" + text[closer:]


json_like_text = (st.text()
                  | st.text(alphabet='[]{}:,"\\0123456789.eE-+ \n\ttruefalsnNaIfiy', max_size=80)
                  | near_json())

random_bytes_as_text = st.binary(max_size=2000).map(lambda b: b.decode("utf-8", errors="replace"))

# YAML frontmatter fields that exercise PyYAML's constructors: explicit tags, implicit dates and
# timestamps (often out of range), binary/hex/float spellings, anchors, flow collections.
yaml_keys = (st.sampled_from(["name", "description", "disable-model-invocation", "allowed-tools", "<<", "? x"])
             | st.from_regex(r"\A[A-Za-z_][A-Za-z0-9_-]{0,10}\Z"))
yaml_tags = st.sampled_from(["", "", "", "!!str ", "!!int ", "!!float ", "!!bool ", "!!null ", "!!timestamp ",
                             "!!binary ", "!!map ", "!!seq ", "!!set ", "!!omap ", "!!pairs ", "!local "])
yaml_scalars = st.one_of(
    st.text(max_size=30),
    st.from_regex(r"\A[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}\Z"),
    st.from_regex(r"\A[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}[Tt ][0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?"
                  r"(Z|[-+][0-9]{1,2}(:[0-9]{2})?)?\Z"),
    st.from_regex(r"\A[-+]?(0b|0x|0|\.|[1-9])[0-9a-fA-F_:]{0,5}\Z"),
    st.sampled_from(["~", "null", "yes", "no", "on", "off", ".nan", ".inf", "-.inf", "[]", "{}", "[a, b]",
                     "{a: 1}", "&a x", "*a", "|\n  block", ">\n  folded", "'quoted: value'", "a: b: c", "- item"]),
)
yaml_fields = st.lists(
    st.tuples(yaml_keys, yaml_tags, yaml_scalars).map(lambda t: f"{t[0]}: {t[1]}{t[2]}"), max_size=6,
).map("\n".join)

# Frontmatter on which PyYAML's SafeConstructor (or the runner's strict mapping constructor) raises
# something other than yaml.YAMLError; frontmatter.parse must turn each into a finding.
FRONTMATTER_CRASHERS = [
    "x: 2020-02-30",          # ValueError: day is out of range for month (implicit timestamp)
    "x: 0b_",                 # ValueError: invalid literal for int() with base 2: ''
    "x: " + "1" * 5000,       # ValueError: Exceeds the limit (4300 digits) for integer string conversion
    "x: !!bool maybe",        # KeyError: 'maybe'
    "x: !!timestamp 2020",    # AttributeError: 'NoneType' object has no attribute 'groupdict'
    "x: !!map [a]",           # TypeError: cannot unpack non-iterable ScalarNode object (runner's _construct_mapping)
]

toml_scalars = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.booleans().map(lambda b: str(b).lower()),
    st.text(max_size=20).map(json.dumps),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["1979-05-27", "07:32:00", "1979-05-27T07:32:00Z", "inf", "nan", "0x1F", "1_000"]),
)
toml_values = st.recursive(toml_scalars,
                           lambda children: st.lists(children, max_size=4).map(lambda xs: "[" + ", ".join(xs) + "]"),
                           max_leaves=8)
toml_tables = st.sampled_from(["library", "validator", "limits", "listing", "classify", "[case_override]",
                               "[assertion_override]", "[trigger_set]", "extra"])
toml_keys = (st.sampled_from(["skills", "agents", "templates", "command", "enabled", "timeout_s", "max_file_bytes",
                              "max_probe_lines", "budget_chars", "max_description_chars", "refusal_id_prefixes",
                              "uid", "kind", "reason", "index", "class", "skill", "path"])
             | st.from_regex(r"\A[a-z_-]{1,10}\Z"))
toml_documents = st.lists(
    st.tuples(toml_tables, st.lists(st.tuples(toml_keys, toml_values), max_size=4)), max_size=4,
).map(lambda tables: "\n".join(f"[{name}]\n" + "\n".join(f"{k} = {v}" for k, v in pairs)
                               for name, pairs in tables))


# ---- helpers ----------------------------------------------------------------------------------

def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def pointers(value: Any, prefix: str = "") -> list[str]:
    """Every JSON pointer in value, in the order json.dumps writes them (pre-order)."""
    out = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            out += pointers(child, prefix + "/" + _escape(key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            out += pointers(child, f"{prefix}/{index}")
    return out


def paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every (key or index) path below the root of a parsed JSON value."""
    out: list[tuple] = []
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else []
    for key, child in items:
        out.append(prefix + (key,))
        out += paths(child, prefix + (key,))
    return out


def _parent(doc: Any, path: tuple) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def mutated_documents(original: Any) -> st.SearchStrategy[Any]:
    """The original document, structurally plausible but wrong in one place: one value replaced by a
    random JSON value, one key or item removed, or one unknown top-level key (or item) added."""
    every = paths(original)

    def replace(args: tuple[tuple, Any]) -> Any:
        path, new = args
        doc = copy.deepcopy(original)
        _parent(doc, path)[path[-1]] = new
        return doc

    def delete(path: tuple) -> Any:
        doc = copy.deepcopy(original)
        del _parent(doc, path)[path[-1]]
        return doc

    def add(args: tuple[str, Any]) -> Any:
        key, new = args
        doc = copy.deepcopy(original)
        if isinstance(doc, dict):
            doc[key] = new
        else:
            doc.append(new)
        return doc

    return st.one_of(st.tuples(st.sampled_from(every), json_values).map(replace),
                     st.sampled_from(every).map(delete),
                     st.tuples(json_keys, json_values).map(add))


SKILLS = ".claude/skills"
PROBE_DIR = f"{SKILLS}/test-report-triage/evals/probes/rc-summary-empty-payments-suite"
# A skill-creator trigger set, named in the .skill-evals.toml every corrupted copy gets, so the
# trigger_set loader is fed the same corruptions as the files of the skills folder.
TRIGGER_SET = "trigger-sets/migration-planner.json"
TRIGGER_SET_DOC = [
    {"query": "Plan adding a NOT NULL column to a 80M-row table without downtime", "should_trigger": True},
    {"query": "Write the postmortem for last night's checkout outage", "should_trigger": False},
]
SETTINGS_TEXT = f'[[trigger_set]]\nskill = "migration-planner"\npath = "{TRIGGER_SET}"\n'
TARGETS = [
    f"{SKILLS}/migration-planner/SKILL.md",
    f"{SKILLS}/migration-planner/evals/evals.json",
    f"{SKILLS}/migration-planner/evals/trigger-evals.json",
    f"{PROBE_DIR}/probe.json",
    f"{PROBE_DIR}/question.md",
    TRIGGER_SET,
]
# The schemas a loader accepts for each JSON file (evals.json may be either convention).
ACCEPTED_SCHEMAS = {
    "evals.json": [schema_check.AEGIS_EVALS, schema_check.SKILL_CREATOR_EVALS],
    "trigger-evals.json": [schema_check.AEGIS_TRIGGER],
    "probe.json": [schema_check.PROBE],
    TRIGGER_SET.rsplit("/", 1)[-1]: [schema_check.SKILL_CREATOR_TRIGGER_SET],
}


def original_bytes(rel: str) -> bytes:
    """The file as the uncorrupted copy holds it."""
    if rel == TRIGGER_SET:
        return _dump(TRIGGER_SET_DOC, 2)
    return (EXAMPLE / rel).read_bytes()


def _dump(value: Any, indent: int | None) -> bytes:
    return json.dumps(value, indent=indent, ensure_ascii=False).encode("utf-8")


def corruptions_of(rel: str) -> st.SearchStrategy[tuple[str, bytes]]:
    """(how, new bytes) for the file at rel: random bytes, random JSON, and per file type a wrong
    but plausible document (JSON files) or random YAML-ish frontmatter (SKILL.md)."""
    options = [
        st.binary(max_size=3000).map(lambda b: ("bytes", b)),
        st.tuples(json_values, st.sampled_from([None, 2])).map(lambda a: ("json", _dump(*a))),
    ]
    if rel.endswith(".json"):
        original = json.loads(original_bytes(rel))
        options.append(mutated_documents(original).map(lambda doc: ("mutated", _dump(doc, 2))))
    if rel.endswith("SKILL.md"):
        options.append(yaml_fields.map(lambda y: ("frontmatter", f"---\n{y}\n---\n# Body\n".encode("utf-8"))))
    if rel.endswith(".md"):
        options.append(st.text(max_size=3000).map(lambda t: ("text", t.encode("utf-8"))))
    return st.one_of(options)


corruptions = st.sampled_from(TARGETS).flatmap(lambda rel: st.tuples(st.just(rel), corruptions_of(rel)))

# Corruptions that once made the pipeline raise instead of reporting a finding (regression pins).
PROBE_SEEDED_1E20 = json.loads((EXAMPLE / PROBE_DIR / "probe.json").read_text(encoding="utf-8")) | {
    "seeded_defects": 1e20}
LIBRARY_CRASHERS = [
    # A float JSON Schema calls an integer but too big for pydantic's int: a ValidationError escaped.
    (f"{PROBE_DIR}/probe.json", ("mutated", _dump(PROBE_SEEDED_1E20, 2))),
    # An impossible implicit date in the frontmatter: PyYAML's timestamp constructor's ValueError escaped.
    (f"{SKILLS}/migration-planner/SKILL.md", ("frontmatter", b"---\nname: x\nreleased: 2020-02-30\n---\n# Body\n")),
    # An integer literal over Python's 4,300-digit limit: json.loads's bare ValueError escaped.
    (f"{SKILLS}/migration-planner/evals/evals.json", ("bytes", b"1" * 5000)),
]


def _valid_under(data: bytes, schemas: list[str]) -> bool:
    """Whether the bytes, read as the loader reads them, are a document one of the schemas accepts."""
    try:
        value = json.loads(data.decode("utf-8").removeprefix("\ufeff"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return False
    return any(Draft202012Validator(schema_check.schema(name)).is_valid(value) for name in schemas)


def _corrupt_copy(into: Path, rel: str, data: bytes) -> Path:
    """A copy of the example library plus a settings file naming a trigger set, with rel overwritten."""
    library = into / "library"
    shutil.copytree(EXAMPLE, library, symlinks=True)
    (library / settings_mod.SETTINGS_FILE).write_text(SETTINGS_TEXT, encoding="utf-8")
    (library / TRIGGER_SET).parent.mkdir(parents=True)
    (library / TRIGGER_SET).write_bytes(original_bytes(TRIGGER_SET))
    (library / rel).write_bytes(data)
    return library


def _check_findings(found: list[Any]) -> None:
    for finding in found:
        assert isinstance(finding, Finding), finding
        assert finding.line >= 1, finding
        assert finding.col is None or finding.col >= 1, finding


# ---- runner.corpus.jsonfile --------------------------------------------------------------------------

def _check_parse_result(text: str, result: Any) -> None:
    doc, problem = result
    assert (doc is None) != (problem is None), result
    last_line = text.count("\n") + 1
    if problem is not None:
        assert isinstance(problem, Finding)
        assert problem.rule == "json-syntax"
        assert 1 <= problem.line <= last_line, problem
        return
    assert isinstance(doc, jsonfile.JsonDocument)
    assert doc.lines.get("") == 1
    assert all(1 <= line <= last_line for line in doc.lines.values()), doc.lines


@PURE
@given(json_like_text)
@example("1" * 5000)  # json.loads raises a bare ValueError past the 4,300-digit int limit
def test_jsonfile_parse_arbitrary_text_gives_document_or_finding(text: str) -> None:
    """jsonfile.parse on any text returns (JsonDocument, None) or (None, json-syntax Finding) whose
    line lies inside the text; it never raises."""
    _check_parse_result(text, jsonfile.parse(text, "x.json"))


@PURE
@given(random_bytes_as_text)
def test_jsonfile_parse_random_bytes_gives_document_or_finding(text: str) -> None:
    """jsonfile.parse on random bytes (decoded with errors='replace') never raises: a document or a
    json-syntax finding inside the text."""
    _check_parse_result(text, jsonfile.parse(text, "x.json"))


@PURE
@given(json_values, st.sampled_from([None, 0, 2]))
def test_jsonfile_parse_round_trips_and_locates_every_pointer(value: Any, indent: int | None) -> None:
    """Text written by json.dumps parses to the same value, and doc.lines holds exactly the value's
    JSON pointers, each on a line of the text; with indent, every pointer starts a new line, so the
    lines strictly increase in the order json.dumps writes them (dict order, list order, pre-order)."""
    text = json.dumps(value, indent=indent)
    doc, problem = jsonfile.parse(text, "x.json")
    assert problem is None and doc is not None
    assert doc.data == value
    expected = pointers(value)
    assert set(doc.lines) == set(expected)
    last_line = text.count("\n") + 1
    assert all(1 <= doc.lines[p] <= last_line for p in expected)
    if indent is not None:
        in_order = [doc.lines[p] for p in expected]
        assert in_order == sorted(in_order)
        assert len(set(in_order)) == len(in_order), "each pointer starts its own line in indented JSON"


def test_jsonfile_parse_deep_nesting_is_a_finding() -> None:
    """JSON nested far past the recursion limit is a json-syntax finding, not a RecursionError."""
    doc, problem = jsonfile.parse("[" * 100_000 + "]" * 100_000, "x.json")
    assert doc is None
    assert isinstance(problem, Finding) and problem.rule == "json-syntax"


# ---- runner.corpus.frontmatter -----------------------------------------------------------------------

FRONTMATTER_RULES = {"frontmatter-missing", "frontmatter-unclosed", "frontmatter-yaml"}


def _check_frontmatter_result(text: str, result: Any) -> None:
    fm, problem = result
    assert (fm is None) != (problem is None), result
    if problem is not None:
        assert isinstance(problem, Finding)
        assert problem.rule in FRONTMATTER_RULES
        assert problem.line >= 1
        return
    assert isinstance(fm, frontmatter.Frontmatter)
    assert isinstance(fm.fields, dict) and all(isinstance(k, str) for k in fm.fields)
    assert all(line >= 2 for line in fm.key_lines.values())
    assert fm.body_line >= 3 and fm.end_line == fm.body_line - 1


@PURE
@given(st.text())
def test_frontmatter_parse_arbitrary_text(text: str) -> None:
    """frontmatter.parse on any text returns exactly one of (Frontmatter, None) / (None, Finding)."""
    _check_frontmatter_result(text, frontmatter.parse(text, "SKILL.md"))


@PURE
@given(st.text())
def test_frontmatter_parse_random_block(inner: str) -> None:
    """A '---' block around random text never makes frontmatter.parse raise: a Frontmatter or a finding."""
    text = "---\n" + inner + "\n---\nbody"
    _check_frontmatter_result(text, frontmatter.parse(text, "SKILL.md"))


@PURE
@given(yaml_fields)
@example(FRONTMATTER_CRASHERS[0])
@example(FRONTMATTER_CRASHERS[1])
@example(FRONTMATTER_CRASHERS[2])
@example(FRONTMATTER_CRASHERS[3])
@example(FRONTMATTER_CRASHERS[4])
@example(FRONTMATTER_CRASHERS[5])
def test_frontmatter_parse_yaml_like_fields(fields: str) -> None:
    """Frontmatter fields built from YAML's tricky spellings (explicit tags, out-of-range dates and
    timestamps, 0b/0x/. numbers, anchors, flow collections) give a Frontmatter or a frontmatter-yaml
    finding; no constructor error escapes frontmatter.parse."""
    text = "---\n" + fields + "\n---\nbody"
    _check_frontmatter_result(text, frontmatter.parse(text, "SKILL.md"))


# ---- runner.corpus.settings --------------------------------------------------------------------------

def _check_settings(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        path = base / settings_mod.SETTINGS_FILE
        path.write_bytes(data)
        loaded, found = settings_mod.load(path, base)
    assert isinstance(loaded, settings_mod.Settings)
    assert isinstance(found, list)
    _check_findings(found)
    assert all(f.file == settings_mod.SETTINGS_FILE for f in found)
    if found:
        assert loaded == settings_mod.Settings(), "a settings file with findings falls back to the defaults"


@FILES
@given(st.binary(max_size=2000))
@example(b"x = " + b"1" * 5000)  # tomllib raises a bare ValueError past the 4,300-digit int limit
def test_settings_load_random_bytes(data: bytes) -> None:
    """settings.load on random bytes never raises: Settings plus findings (defaults when there are findings)."""
    _check_settings(data)


@FILES
@given(toml_documents)
def test_settings_load_toml_like_documents(text: str) -> None:
    """settings.load on TOML-shaped documents with real and made-up tables, keys and values never
    raises: syntax and schema problems are settings-* findings on the settings file."""
    _check_settings(text.encode("utf-8"))


# ---- the whole pipeline on a corrupted example library ----------------------------------------

@FILES
@given(corruptions)
@example(*LIBRARY_CRASHERS[0:1])
@example(*LIBRARY_CRASHERS[1:2])
@example(*LIBRARY_CRASHERS[2:3])
def test_corrupted_library_gives_findings(corruption: tuple[str, tuple[str, bytes]]) -> None:
    """One file of the example library (SKILL.md, evals.json, trigger-evals.json, probe.json,
    question.md, or a skill-creator trigger set named in .skill-evals.toml) overwritten by random
    bytes, random JSON, random frontmatter or a plausible but wrong document: load_library,
    validate.check_library and census.compute never raise; every finding is a Finding with line >= 1;
    and an eval, trigger-set or probe file that no schema its loader accepts validates is named by at
    least one finding."""
    rel, (how, data) = corruption
    event(f"{rel.rsplit('/', 1)[-1]} <- {how}")  # shown by --hypothesis-show-statistics
    with tempfile.TemporaryDirectory() as tmp:
        library_dir = _corrupt_copy(Path(tmp), rel, data)
        settings_file = library_dir / settings_mod.SETTINGS_FILE
        loaded, settings_findings = settings_mod.load(settings_file, library_dir)
        assert settings_findings == [] and len(loaded.trigger_set) == 1
        library, found = load_library(library_dir, loaded, settings_file)
        checked = validate.check_library(library, loaded)
        report = census.compute(library, loaded, found + checked)
        report.model_dump_json()
        render_json(found + checked)
    _check_findings(found + checked)
    schemas = ACCEPTED_SCHEMAS.get(rel.rsplit("/", 1)[-1])
    if schemas and not _valid_under(data, schemas):
        event("schema-invalid JSON file: a finding must name it")
        assert any(f.file.endswith(rel) for f in found + checked), (
            f"{rel} is valid under none of {schemas}, yet no finding names it: {[f.location() for f in found]}")


@CLI
@given(corruptions)
@example(*LIBRARY_CRASHERS[0:1])
def test_cli_never_prints_a_traceback(corruption: tuple[str, tuple[str, bytes]]) -> None:
    """`validate` and `census --format json` on a corrupted library exit 0 or 1, raise nothing but
    SystemExit, print no traceback, and print JSON."""
    rel, (_how, data) = corruption
    runner = CliRunner()
    with tempfile.TemporaryDirectory() as tmp:
        library_dir = str(_corrupt_copy(Path(tmp), rel, data))
        for args in (["validate", "--library", library_dir, "--format", "json", "--no-library-validator"],
                     ["census", "--library", library_dir, "--format", "json"]):
            result = runner.invoke(main, args, catch_exceptions=True)
            assert result.exception is None or isinstance(result.exception, SystemExit), (
                args[0], repr(result.exception))
            assert result.exit_code in (0, 1), (args[0], result.exit_code, result.output)
            assert "Traceback" not in result.output
            json.loads(result.stdout)


@pytest.mark.parametrize("rel", TARGETS)
def test_corruption_strategy_targets_exist(rel: str) -> None:
    """The files the library properties corrupt exist in the uncorrupted copy, and that copy loads with
    every one of them read (else the properties would test nothing)."""
    with tempfile.TemporaryDirectory() as tmp:
        library_dir = _corrupt_copy(Path(tmp), rel, original_bytes(rel))
        assert (library_dir / rel).is_file()
        loaded, settings_findings = settings_mod.load(library_dir / settings_mod.SETTINGS_FILE, library_dir)
        assert settings_findings == []
        library, found = load_library(library_dir, loaded, library_dir / settings_mod.SETTINGS_FILE)
    assert not [f for f in found if f.file.endswith(rel)], [f.location() for f in found]
    if rel.endswith(".json"):
        read = {case.file for case in library.cases} | {probe.file for probe in library.probes}
        assert any(file.endswith(rel) for file in read), (rel, sorted(read))
