"""The cache folder: one file per case key, one per surface capture, bounded in size, least recently used out.

    <cache>/CACHEDIR.TAG                     marks the folder as a cache (backup tools skip it)
    <cache>/entries/<key[:2]>/<key>.json.gz  a case's attempts (their records and transcripts) and where they ran
    <cache>/surfaces/<key>.json              a surface audit's result
    <cache>/last-routing.json                the routing matrix's confusions, row by row from the last run that
                                             measured each row (what a pull request's pr tier follows)

Every file is written to a temporary name and renamed, so a reader sees a whole file or none; one that cannot be
read, or whose key is not its name, is a miss (said, never raised). A hit touches its file: eviction removes the
least recently used first, until the folder is within its bound.

Trust: whatever can write this folder decides what a later run reuses. The runner writes it only from runs it
was told may write (`--cache` without `--cache-read-only`); the action writes it only from the base branch and
never from a pull request (docs/design/result-cache.md).
"""

from __future__ import annotations

import gzip
import io
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from runner.cache.keys import CACHE_FORMAT
from runner.corpus import bounded
from runner.hosts.surface import Surface

ENTRIES = "entries"
SURFACES = "surfaces"
LAST_ROUTING = "last-routing.json"
TAG = "CACHEDIR.TAG"
TAG_TEXT = ("Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This folder is a result cache of skill-evals (docs/cli.md#the-result-cache).\n")
ENTRY_MAX_BYTES = 64 * 1_048_576  # compressed; a case's records and transcripts are far smaller
ENTRY_MAX_EXPANDED = 512 * 1_048_576  # what one entry may expand to (a file that expands further is refused)
DEFAULT_MAX_MB = 512


class Origin(BaseModel):
    """The run whose attempts an entry holds."""

    run: str = Field(description="The run folder's name.")
    plan_hash: str
    finished_at: str
    label: str = Field(default="", description="Where it ran, when the runner was told (--cache-label: e.g. the "
                                               "CI run and commit).")

    def describe(self) -> str:
        return f"run {self.run}" + (f" ({self.label})" if self.label else "") + f", {self.finished_at}"


class Entry(BaseModel):
    format: int = CACHE_FORMAT
    key: str
    uid: str
    made_at: str
    origin: Origin
    fired: dict[str, str] = Field(default={}, description="Skills that fired in these attempts besides the case's "
                                                         "own -> their folder digest then: an entry is used only "
                                                         "while they are unchanged.")
    attempts: list[dict[str, Any]] = Field(description="The attempt records as their run folder held them, "
                                                       "without their run folder's MAC.")
    transcripts: dict[str, Any] = Field(default={}, description="Attempt id -> its transcript (messages).")


@dataclass
class Store:
    """A cache folder. `writable`: whether this run may add entries (and evict)."""

    root: Path
    max_bytes: int = DEFAULT_MAX_MB * 1_048_576
    writable: bool = True
    max_expanded: int = ENTRY_MAX_EXPANDED
    notes: list[str] = field(default_factory=list)  # what could not be read or written, for the run's output

    def open(self) -> Store:
        if self.writable:
            self.root.mkdir(parents=True, exist_ok=True)
            tag = self.root / TAG
            if not tag.exists():
                _write_atomically(tag, TAG_TEXT.encode())
        return self

    # ---- entries

    def entry_path(self, key: str) -> Path:
        return self.root / ENTRIES / key[:2] / f"{key}.json.gz"

    def get(self, key: str) -> Entry | None:
        path = self.entry_path(key)
        if not path.exists():
            return None
        try:
            raw = _gunzip(bounded.read_bytes(path, ENTRY_MAX_BYTES), self.max_expanded)
            entry = Entry.model_validate_json(raw)
        except (OSError, EOFError, ValueError, ValidationError) as exc:
            self.notes.append(f"{path}: not a readable cache entry ({str(exc).splitlines()[0][:160]}); the case runs")
            return None
        if entry.key != key or entry.format != CACHE_FORMAT:
            self.notes.append(f"{path}: holds another key or format; the case runs")
            return None
        _touch(path)
        return entry

    def put(self, entry: Entry) -> None:
        if not self.writable:
            return
        data = gzip.compress(entry.model_dump_json().encode("utf-8"), compresslevel=6, mtime=0)
        try:
            _write_atomically(self.entry_path(entry.key), data)
        except OSError as exc:
            self.notes.append(f"{self.entry_path(entry.key)}: could not be written ({exc.strerror or exc})")

    # ---- surface captures

    def surface_path(self, key: str) -> Path:
        return self.root / SURFACES / f"{key}.json"

    def get_surface(self, key: str) -> Surface | None:
        path = self.surface_path(key)
        if not path.exists():
            return None
        try:
            surface = Surface.model_validate_json(bounded.read_bytes(path, bounded.OPTION_FILE_MAX_BYTES))
        except (OSError, ValueError, ValidationError):
            self.notes.append(f"{path}: not a readable surface capture; the surface is audited again")
            return None
        _touch(path)
        return surface

    def put_surface(self, key: str, surface: Surface) -> None:
        if self.writable and surface.error is None:
            try:
                _write_atomically(self.surface_path(key), surface.model_dump_json().encode("utf-8"))
            except OSError as exc:
                self.notes.append(f"{self.surface_path(key)}: could not be written ({exc.strerror or exc})")

    # ---- the last routing matrix

    @property
    def last_routing_path(self) -> Path:
        return self.root / LAST_ROUTING

    def put_routing(self, routing: dict[str, Any], label: str) -> None:
        """Keep this run's confusions as the newest word on the rows it measured (`routing.rows`), and the earlier
        file's confusions of the rows it did not (a pull request's run measures a few skills, a nightly all), so
        the file reads as a results.json with `routing.confusions` (runner.plan.confusions)."""
        if not self.writable:
            return
        measured = set(routing.get("rows") or {})
        kept = [c for c in self._last_confusions() if isinstance(c, dict) and c.get("expected") not in measured]
        merged = {"routing": {"confusions": [*routing.get("confusions", []), *kept]}, "label": label}
        try:
            _write_atomically(self.last_routing_path, json.dumps(merged).encode("utf-8"))
        except OSError as exc:
            self.notes.append(f"{self.last_routing_path}: could not be written ({exc.strerror or exc})")

    def _last_confusions(self) -> list[Any]:
        try:
            raw = json.loads(bounded.read_text(self.last_routing_path, ENTRY_MAX_BYTES))
        except FileNotFoundError:
            return []
        except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
            self.notes.append(f"{self.last_routing_path}: unreadable, started afresh ({exc})")
            return []
        routing = raw.get("routing") if isinstance(raw, dict) else None
        confusions = routing.get("confusions") if isinstance(routing, dict) else None
        return confusions if isinstance(confusions, list) else []

    # ---- size

    def files(self) -> list[tuple[float, int, Path]]:
        """(last use, size, path) of every entry and capture."""
        out = []
        for path in [*self.root.glob(f"{ENTRIES}/*/*.json.gz"), *self.root.glob(f"{SURFACES}/*.json")]:
            try:
                info = path.stat()
            except OSError:
                continue
            out.append((info.st_mtime, info.st_size, path))
        return out

    def evict(self) -> int:
        """Remove the least recently used files until the folder is within its bound; how many were removed."""
        if not self.writable:
            return 0
        files = sorted(self.files())
        total = sum(size for _, size, _ in files)
        removed = 0
        for _, size, path in files:
            if total <= self.max_bytes:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            removed += 1
        return removed


def _gunzip(data: bytes, limit: int) -> bytes:
    """The data decompressed, refused (ValueError) past `limit` bytes: a small file may expand without bound."""
    with gzip.GzipFile(fileobj=io.BytesIO(data)) as handle:
        out = handle.read(limit + 1)
    if len(out) > limit:
        raise ValueError(f"it expands past {limit:,} bytes")
    return out


def _touch(path: Path) -> None:
    try:
        os.utime(path, (time.time(), time.time()))
    except OSError:
        pass  # a read-only cache (a restored one): its order of use is not ours to keep


def _write_atomically(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
