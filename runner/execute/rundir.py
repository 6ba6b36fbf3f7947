"""The run folder: plan.json first, one line per finished attempt, transcripts, results.json.

Contract: a crash loses at most the attempt being written (each record is fsynced as it finishes; a torn last line
is cut, or completed, before the next append); one process per folder (`claim`); records are signed with the
folder's own key when the plan says so (`record_mac`).

Design notes: docs/design/run-folder-and-records.md.
"""

from __future__ import annotations

import errno
import hashlib
import hmac
import json
import math
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, BinaryIO, Literal

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticSerializationError

from runner.core.errors import UsageError
from runner.core.host_traits import ActivationGrade
from runner.core.observation import Bound, CostBasis, Decided, FirstTurn, ToolCall, Usage
from runner.core.outcomes import AttemptOutcome
from runner.corpus import bounded
from runner.corpus.findings import is_unicode, printable_tree
from runner.judge.prose import JudgeCall
from runner.probes.arms import ProbeGrade

PLAN = "plan.json"
SURFACE = "surface.json"
ATTEMPTS = "attempts.jsonl"
RESULTS = "results.json"
TRANSCRIPTS = "transcripts"
RESERVATIONS = "reservations.jsonl"
LOCK = "run.lock"
REPAIRS = "repairs.jsonl"
TORN = "torn"
KEY = "attempts.key"
KEY_BYTES = 32
MAC_FIELD = "mac"


class Reused(BaseModel):
    """An attempt taken from the result cache (runner.cache): it ran in another run, whose figures these are. The
    record's own cost fields are 0 (this run spent nothing on it)."""

    key: str = Field(description="The cache key of the case's attempts (runner.cache.keys.case_key).")
    run: str = Field(description="The run folder it ran in.")
    plan_hash: str = Field(description="That run's plan hash.")
    finished_at: str = Field(description="When that run finished.")
    label: str = Field(default="", description="Where that run ran, when it was told (--cache-label).")
    cost_usd: float = Field(default=0.0, description="What the attempt cost in that run (session and judge).")


class AttemptRecord(BaseModel):
    attempt_id: str
    uid: str
    arm: str
    repeat: int
    plan_hash: str
    status: Literal["finished", "cancelled"]
    outcome: AttemptOutcome | None = None
    error_kind: str | None = None
    error_message: str | None = None
    bounds_hit: list[Bound] = []
    turns: int = 0
    usage: Usage = Usage()
    cost_usd: float = 0.0
    # How cost_usd was established, and its part that is a bound for lost replies (runner.hosts.billing).
    cost_basis: CostBasis = "reported"
    bound_usd: float = 0.0
    lost_replies: int = 0
    host_cost_usd: float | None = None
    reserved_usd: float = 0.0
    # The journal line of the session's reservation (reservations.jsonl) this record settles; None when the
    # ledger kept no journal (older run folders, batch mode, re-judging): then this record alone shows its spend.
    reservation_id: str | None = None
    duration_s: float = 0.0
    # What the model received before the case prompt, hashed (runner.core.observation.Observation.prefix_hash), the
    # session-path mode (claude-code) and the first model call's input: results.json's `cost` is made of them.
    prefix_hash: str | None = None
    session_path: str | None = None
    first_turn_input_tokens: int | None = None
    model_calls: int | None = None
    decided: Decided | None = None  # the host ended the session once its outcome was certain
    # How the session's host showed an activation (runner.core.host_traits.ActivationGrade): a verdict read from a
    # file-read host's attempts is labelled so in every report. None: a record from before grades were kept.
    activation_grade: ActivationGrade | None = None
    first_turn: FirstTurn | None = None  # first-turn host: decided by the first reply, or handed off
    transcript: str | None = None
    final_answer: str | None = None
    tool_calls: list[ToolCall] = []
    judge: JudgeCall | None = None
    probe: ProbeGrade | None = None  # tier-2 probe attempts: the graded act, arm, band score, skill fired
    reused: Reused | None = None  # taken from the result cache: ran in another run (runner.cache)
    # HMAC-SHA256 (hex) of the record's canonical JSON without this field, under the run folder's key (record_mac);
    # None in a run folder whose plan does not sign its records (made before records were signed).
    mac: str | None = None

    @property
    def total_cost_usd(self) -> float:
        return self.cost_usd + (self.judge.cost_usd if self.judge else 0.0)


def safe_name(attempt_id: str) -> str:
    """A file-name-safe form of an id. Not one-to-one (`a b` and `a_b` map alike): batch files use it for ids
    the runner makes itself; transcripts, named after case ids an author wrote, use `transcript_name`."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", attempt_id)


SLUG_CHARS = 80  # keeps a transcript's name far below the 255 bytes a file name may have


def transcript_name(attempt_id: str) -> str:
    """A readable slug of the id plus a hash of the whole id: two ids never share a file, whatever their
    characters (`case one` / `case_one`, `тест-1` / `проверка-1`) or length."""
    digest = hashlib.sha256(attempt_id.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    slug = safe_name(attempt_id).strip("._")[:SLUG_CHARS]
    return f"{slug}-{digest}" if slug else digest


def _record_json(record: AttemptRecord, key: bytes | None = None) -> str:
    """The record as one JSON line, signed with `key` when given. A host's or judge's text may hold half a surrogate
    pair (JSON allows the escape "\\ud83d", UTF-8 cannot write it): such text is kept as the visible escape, never
    a lost record."""
    try:
        line = record.model_dump_json(exclude={MAC_FIELD})
    except PydanticSerializationError:
        line = AttemptRecord.model_validate(printable_tree(record.model_dump())).model_dump_json(exclude={MAC_FIELD})
    if key is None:
        return line
    # The MAC is of the line as a reader will parse it, so writer and reader hash the same canonical form.
    return line[:-1] + f',"{MAC_FIELD}":"{record_mac(key, json.loads(line))}"}}'


def canonical_json(fields: dict[str, Any]) -> bytes:
    """One byte string per JSON value, whatever the key order or spacing it was written with: what a MAC covers."""
    return json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode("ascii")


def record_mac(key: bytes, fields: dict[str, Any]) -> str:
    """HMAC-SHA256 (hex) of a record's fields, its own `mac` left out."""
    body = {name: value for name, value in fields.items() if name != MAC_FIELD}
    return hmac.new(key, canonical_json(body), hashlib.sha256).hexdigest()


def signed_line(fields: dict[str, Any], key: bytes | None) -> str:
    """A record's JSON object as one line, signed again with `key` (another folder's records, e.g. merged shards),
    or unsigned when `key` is None."""
    body = {name: value for name, value in fields.items() if name != MAC_FIELD}
    if key is not None:
        body[MAC_FIELD] = record_mac(key, body)
    return json.dumps(body, ensure_ascii=True, separators=(",", ":"))


def mac_matches(key: bytes, fields: dict[str, Any]) -> bool:
    given = fields.get(MAC_FIELD)
    return isinstance(given, str) and hmac.compare_digest(given, record_mac(key, fields))


class RunFolderKeyError(UsageError, ValueError):
    """The run folder's key cannot be trusted or is missing where its plan signs records (a usage error: the CLI
    reports it and exits 2; no record of the folder can be verified without it)."""


def read_key(folder: Path) -> bytes | None:
    """The run folder's key; None when it has none. Opened without following a link and without blocking on a
    FIFO; refused unless it is a regular file of this user, unreadable by others, of KEY_BYTES bytes."""
    path = folder / KEY
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else exc.strerror
        raise RunFolderKeyError(f"{path}: the run folder's key cannot be used ({why}); it must be a regular file "
                                f"this runner made") from None
    try:
        info = os.fstat(fd)
        problem = None
        if not stat.S_ISREG(info.st_mode):
            problem = "not a regular file"
        elif info.st_uid != os.geteuid():
            problem = f"owned by uid {info.st_uid}, not by this user ({os.geteuid()})"
        elif info.st_mode & 0o077:
            problem = f"mode {stat.S_IMODE(info.st_mode):04o}: others may read or change it (0600 expected)"
        elif info.st_size != KEY_BYTES:
            problem = f"{info.st_size} bytes, not {KEY_BYTES}"
        if problem:
            raise RunFolderKeyError(f"{path}: the run folder's key cannot be used ({problem}); the folder was "
                                    f"tampered with or damaged, so its records cannot be verified")
        key = os.read(fd, KEY_BYTES + 1)
    finally:
        os.close(fd)
    if len(key) != KEY_BYTES:
        raise RunFolderKeyError(f"{path}: the run folder's key changed while it was read")
    return key


def create_key(folder: Path) -> bytes:
    """A new key for the folder: created exclusively (never an existing file, never through a link), 0600."""
    key = os.urandom(KEY_BYTES)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(folder / KEY, flags, 0o600)
    try:
        os.fchmod(fd, 0o600)  # whatever the umask
        os.write(fd, key)
        os.fsync(fd)
    finally:
        os.close(fd)
    return key


@dataclass(frozen=True)
class RecordLine:
    """One line of attempts.jsonl as written: its number (1-based), its JSON object (None when it is not one), the
    record (None when it is not a valid AttemptRecord), and whether it ends in its newline (only the last line can
    lack it: a write torn by a kill, unless it is a whole record the next append completes)."""

    number: int
    fields: dict[str, Any] | None
    record: AttemptRecord | None
    whole: bool = True

    @property
    def torn(self) -> bool:
        """A last line cut mid-write: no attempt finished there, so it claims nothing."""
        return not self.whole and self.record is None


def parse_record(text: str) -> tuple[dict[str, Any] | None, AttemptRecord | None]:
    """A line's JSON object and the record validated from that same object: what a MAC covers is what counts (a
    second parser could read a duplicated key another way)."""
    try:
        fields = json.loads(text)
    except ValueError:
        return None, None
    if not isinstance(fields, dict):
        return None, None
    try:
        return fields, AttemptRecord.model_validate(fields)
    except ValidationError:
        return fields, None


def _whole_record(fragment: bytes, key: bytes | None) -> bool:
    """A torn tail that is a whole record missing only its newline: signed under the folder's key when it has one,
    unsigned when it has none."""
    try:
        fields, record = parse_record(fragment.decode("utf-8"))
    except UnicodeDecodeError:
        return False
    if fields is None or record is None:
        return False
    return mac_matches(key, fields) if key is not None else MAC_FIELD not in fields


def _whole_journal_line(fragment: bytes) -> bool:
    """A torn tail of reservations.jsonl that is a whole entry (runner.execute.budget.Journal) missing its newline."""
    try:
        entry = json.loads(fragment.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return False
    return (isinstance(entry, dict) and entry.get("event") in ("reserve", "settle")
            and isinstance(entry.get("id"), str) and isinstance(entry.get("usd"), (int, float))
            and not isinstance(entry.get("usd"), bool) and math.isfinite(entry["usd"]))


class RunFolderBusy(UsageError, ValueError):
    """The run folder cannot be claimed: another live process runs on it, or it cannot be locked at all (a
    usage error: the CLI reports it and exits 2)."""


class TailRepair(BaseModel):
    """A torn last line of an append-only file of the run folder, made whole before the next append: cut off, or
    (a whole record missing only its newline) completed with the newline."""

    file: str = Field(description="The file, relative to the run folder (attempts.jsonl, reservations.jsonl).")
    offset: int = Field(description="Byte offset where the torn line began; a cut file now ends there.")
    bytes_cut: int = Field(description="How many bytes were cut (the torn line, without a newline); 0 when the line "
                                       "was completed.")
    saved_to: str = Field(default="", description="Where the cut bytes are kept, relative to the run folder; empty "
                                                  "when the line was completed (nothing was cut).")
    at: str = Field(description="When the repair was made (UTC).")
    kind: Literal["cut", "completed"] = Field(default="cut", description="cut: the fragment was cut off; completed: "
                                                                         "the last line was a whole record missing "
                                                                         "only its newline, which was appended.")

    def describe(self) -> str:
        if self.kind == "completed":
            return (f"{self.file} ended in a whole record without its newline (from byte {self.offset}: an earlier "
                    f"process was killed after writing it); completed it with the newline, so it counts and is not "
                    f"run again")
        return (f"{self.file} ended in a torn line ({self.bytes_cut} bytes from byte {self.offset}, no newline: an "
                f"earlier process was killed while writing it); cut it before appending, the bytes are kept in "
                f"{self.saved_to}")


def torn_tail(path: Path) -> tuple[int, bytes] | None:
    """(offset, bytes) of a last line without its newline; None when the file is whole, empty or missing."""
    try:
        handle = open(path, "rb")
    except FileNotFoundError:
        return None
    with handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return None
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return None
        offset = _after_last_newline(handle, size)
        handle.seek(offset)
        return offset, handle.read()


def _after_last_newline(handle: BinaryIO, size: int, chunk: int = 1 << 16) -> int:
    """The offset just after the last newline (0 when there is none), read backwards a chunk at a time."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        handle.seek(start)
        found = handle.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _write_durably(path: Path, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _truncate_durably(path: Path, offset: int) -> None:
    with open(path, "r+b") as handle:
        handle.truncate(offset)
        handle.flush()
        os.fsync(handle.fileno())


def _append_durably(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class RunDir:
    def __init__(self, path: Path):
        self.path = path
        self._lock_fd: int | None = None
        self._checked: set[str] = set()  # append-only files whose tail this object already made whole
        # The key every appended record is signed with; None: records are appended unsigned (a plan from before
        # records were signed). Set by make_key (a new plan) or load_key (resuming a signed plan).
        self.key: bytes | None = None

    def create(self) -> None:
        (self.path / TRANSCRIPTS).mkdir(parents=True, exist_ok=True)

    def make_key(self) -> bytes:
        """The key of a plan about to be written here: the folder's own when it has a sound one (a plan written
        again into its folder keeps verifying the records already there), else a new one. Records appended by this
        object are signed with it from now on."""
        self.path.mkdir(parents=True, exist_ok=True)
        key = read_key(self.path)
        if key is None:
            try:
                key = create_key(self.path)
            except FileExistsError:  # made in between (or a dangling link put there): read it with every check
                key = read_key(self.path)
                if key is None:
                    raise RunFolderKeyError(f"{self.path / KEY}: the run folder's key cannot be created (a link or "
                                            f"another file is in its place)") from None
        self.key = key
        return key

    def load_key(self) -> bytes:
        """The key of a plan that signs its records (a resume, a report): it must be there."""
        if self.key is None:
            key = read_key(self.path)
            if key is None:
                raise RunFolderKeyError(
                    f"{self.path / KEY}: missing, but {PLAN} says every record of this run is signed with it; without "
                    f"it no record can be verified (the folder was tampered with or damaged, or copied without its "
                    f"key): start a new run")
            self.key = key
        return self.key

    def claim(self) -> list[TailRepair]:
        """Make this process the one running on the folder, then cut torn tails left by a killed one.

        The lock is an fcntl record lock on run.lock: the kernel drops it when the process ends, however it
        ends (a SIGKILL leaves no stale lock), and it is per process, so the same process may claim again.
        Raises RunFolderBusy when another live process holds it, or when the folder's filesystem has no locks
        (then nothing could keep two processes apart)."""
        import fcntl  # here, not at the top: the readers of a run folder (reports) need no POSIX-only module

        self.path.mkdir(parents=True, exist_ok=True)
        if self._lock_fd is None:
            fd = os.open(self.path / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                holder = os.pread(fd, 64, 0).decode("utf-8", errors="replace").strip() or "unknown"
                os.close(fd)
                if exc.errno not in (errno.EACCES, errno.EAGAIN):
                    raise RunFolderBusy(f"{self.path}: cannot lock {LOCK} ({exc.strerror}); put the run folder on "
                                        f"a filesystem with file locks") from None
                raise RunFolderBusy(
                    f"{self.path}: another skill-evals process (pid {holder}) is running on this run folder; two "
                    f"processes would append to the same attempts. Wait for it to end (or stop it), then resume "
                    f"with `skill-evals run --resume {self.path}`") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            self._lock_fd = fd
        return [cut for cut in (self.repair_tail(ATTEMPTS), self.repair_tail(RESERVATIONS)) if cut is not None]

    def release(self) -> None:
        """Give the folder up before the process ends (the end of the process does it too)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def repair_tail(self, name: str) -> TailRepair | None:
        """Once per file and RunDir: cut a torn last line, keep its bytes in torn/, log it in repairs.jsonl; or,
        when the last line is a whole record missing only its newline, complete it (the design notes)."""
        if name in self._checked:
            return None
        self._checked.add(name)
        torn = torn_tail(self.path / name)
        if torn is None:
            return None
        offset, fragment = torn
        if self._whole(name, fragment):
            _append_durably(self.path / name, b"\n")
            completed = TailRepair(file=name, offset=offset, bytes_cut=0, kind="completed",
                                   at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
            self.append_line(REPAIRS, completed.model_dump_json())
            return completed
        # The bytes are kept before the file is cut: a crash in between loses nothing.
        saved = f"{TORN}/{len(self.repairs()) + 1:03d}-{name}-at-{offset}"
        (self.path / TORN).mkdir(exist_ok=True)
        _write_durably(self.path / saved, fragment)
        _truncate_durably(self.path / name, offset)
        repair = TailRepair(file=name, offset=offset, bytes_cut=len(fragment), saved_to=saved,
                            at=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        self.append_line(REPAIRS, repair.model_dump_json())
        return repair

    def _whole(self, name: str, fragment: bytes) -> bool:
        if name == ATTEMPTS:
            return _whole_record(fragment, self.key if self.key is not None else read_key(self.path))
        return name == RESERVATIONS and _whole_journal_line(fragment)

    def repairs(self) -> list[TailRepair]:
        """Every cut made in this folder, oldest first (results.json shows them all, not only this process's)."""
        path = self.path / REPAIRS
        if not path.exists():
            return []
        out = []
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                out.append(TailRepair.model_validate_json(line))
            except ValidationError:
                continue  # a torn line of the log itself: the cut it describes is still in torn/
        return out

    def append_line(self, name: str, line: str, durable: bool = True) -> None:
        """Append one line with a single write(2): a kill leaves it whole or torn, never interleaved. `durable`:
        fsynced too (a kill never loses a written line, only a machine crash can lose an unsynced one)."""
        self.repair_tail(name)
        data = (line + "\n").encode("utf-8")
        fd = os.open(self.path / name, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            while data:
                data = data[os.write(fd, data):]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)

    def write_json(self, name: str, payload: str) -> None:
        """Write atomically: a reader never sees half a plan or half a results file."""
        target = self.path / name
        temporary = target.with_suffix(target.suffix + ".tmp")
        temporary.write_text(payload, encoding="utf-8")
        os.replace(temporary, target)

    def append_attempt(self, record: AttemptRecord) -> None:
        """Flushed and fsynced, signed with the folder's key when this object holds it (make_key, load_key); the
        first append of this object first repairs a torn tail (docs/design/run-folder-and-records.md)."""
        self.append_line(ATTEMPTS, _record_json(record, self.key))

    def iter_lines(self) -> Iterator[RecordLine]:
        """Every line of attempts.jsonl but blank ones, numbered, read one at a time (never the whole file at
        once)."""
        path = self.path / ATTEMPTS
        if not path.exists():
            return
        # errors="replace": a crash can cut a multi-byte character in the last line (torn, it claims nothing);
        # it must not make the whole file unreadable.
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                fields, record = parse_record(line)
                yield RecordLine(number, fields, record, whole=line.endswith("\n"))

    def iter_attempts(self, plan_hash: str | None = None, slim: bool = False) -> Iterator[AttemptRecord]:
        """The readable records in file order, NOT vetted: for counting anything, read them through
        runner.results.vetting (signature, unique ids, costs, ids the plan can produce).

        plan_hash: only the attempts of that plan. slim: without final_answer and tool_calls, for
        readers that need verdicts only (they are the bulk of a line; the report and re-judging read
        them in full)."""
        for line in self.iter_lines():
            record = line.record
            if record is None or (plan_hash is not None and record.plan_hash != plan_hash):
                continue
            if slim:
                record.final_answer, record.tool_calls = None, []
            yield record

    def read_attempts(self, plan_hash: str | None = None, slim: bool = False) -> list[AttemptRecord]:
        return list(self.iter_attempts(plan_hash, slim))

    def write_transcript(self, attempt_id: str, messages: list[dict[str, Any]]) -> str:
        relative = f"{TRANSCRIPTS}/{transcript_name(attempt_id)}.json"
        text = json.dumps(messages, indent=1, ensure_ascii=False, default=str)
        if not is_unicode(text):
            # Half a surrogate pair (a JSON escape a model may send): ASCII JSON escapes it and reads it back the same.
            text = json.dumps(messages, indent=1, ensure_ascii=True, default=str)
        (self.path / relative).write_text(text, encoding="utf-8")
        return relative

    def read_text(self, name: str) -> str:
        # The folder is named by an option (--resume, judge RUN_DIR): a FIFO or a link to a device is refused unopened.
        return bounded.read_text(self.path / name, bounded.RUN_FILE_MAX_BYTES)
