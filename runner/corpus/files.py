"""Reading the library's files safely: never leave the library, never choke on size or encoding.

A library under review may come from an untrusted pull request. A symlink that points outside
it (say to /etc/passwd or ~/.ssh) is reported and never followed; a huge file is reported and
never read into memory; a file that is not UTF-8 is reported with the line of the first bad byte.
"Inside" is the repository that holds the library, minus its `.git` folder: a checkout's
`.git/config` can hold the token it was cloned with, so a link to it is an escape too.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

from runner.corpus import bounded
from runner.corpus.findings import Finding, display_path, error, warning


@dataclass(frozen=True)
class ReadPolicy:
    """Where reads may go and how big a file may be."""

    allowed_roots: tuple[Path, ...]
    base: Path
    max_bytes: int
    denied: tuple[Path, ...] = ()

    def show(self, path: Path) -> str:
        return display_path(path, self.base)

    def inside(self, path: Path) -> bool:
        real = Path(os.path.realpath(path))
        if any(real == root or root in real.parents for root in self.denied):
            return False
        return any(real == root or root in real.parents for root in self.allowed_roots)


def relative_shown(path: str, folder: str) -> str | None:
    """`path` relative to `folder`, both as shown (relative to the repository root, posix): "" for the
    folder itself, None when the path is not inside it. The folder `.` (the root) holds every path."""
    if folder in ("", "."):
        return path
    if path == folder:
        return ""
    prefix = folder.rstrip("/") + "/"
    return path[len(prefix):] if path.startswith(prefix) else None


# Linux's bounds (NAME_MAX, PATH_MAX): past them every call that takes the path fails (ENAMETOOLONG).
_MAX_NAME_BYTES = 255
_MAX_PATH_BYTES = 4_096


def path_problem(text: str) -> str | None:
    """Why a path written in a file's data (the settings' [library] roots or a trigger set, a plugin manifest's
    source or skills) can name no file on this system, or None. Such a path makes every stat of it raise (a NUL
    byte: ValueError; a name past 255 bytes: ENAMETOOLONG) where a missing file answers False; checked once, where
    the data names it, so that it is a finding there."""
    try:
        encoded = os.fsencode(text)
    except UnicodeEncodeError:
        return "it is not valid Unicode"
    if b"\0" in encoded:
        return "it holds a NUL byte"
    if len(encoded) > _MAX_PATH_BYTES:
        return f"it is longer than {_MAX_PATH_BYTES:,} bytes"
    if any(len(part) > _MAX_NAME_BYTES for part in encoded.split(b"/")):
        return f"a name in it is longer than {_MAX_NAME_BYTES} bytes"
    return None


def make_policy(roots: list[Path], base: Path, max_bytes: int) -> ReadPolicy:
    resolved = tuple(Path(os.path.realpath(r)) for r in roots)
    denied = tuple(Path(os.path.realpath(r)) / ".git" for r in roots)
    return ReadPolicy(allowed_roots=resolved, base=base, max_bytes=max_bytes, denied=denied)


def _line_of_offset(data: bytes, offset: int) -> tuple[int, int]:
    line = data.count(b"\n", 0, offset) + 1
    col = offset - (data.rfind(b"\n", 0, offset) + 1) + 1
    return line, col


def read_text(path: Path, policy: ReadPolicy) -> tuple[str | None, Finding | None]:
    """The file's text, or None and the finding that says why it cannot be read."""
    shown = policy.show(path)
    if path.is_symlink() and not policy.inside(path):
        target = os.readlink(path)
        return None, error("symlink-escape", shown, 1,
                           f"symlink points outside the library (to {target}); it is not followed. "
                           "Copy the file into the skill folder instead.")
    try:
        # A FIFO, a device or a socket (a link to one included) is refused before it is opened (runner.corpus.bounded).
        data = bounded.read_bytes(path, policy.max_bytes)
    except FileNotFoundError:
        return None, error("missing-file", shown, 1, "file not found (a dangling symlink?)")
    except bounded.Refused as exc:
        if exc.too_large:
            return None, error("file-too-large", shown, 1,
                               f"{exc} (raise [limits] max_file_bytes in .skill-evals.toml if this is intended)")
        return None, error("not-a-file", shown, 1, f"expected a file, found {exc}")
    except OSError as exc:  # permissions, a loop of links, a name too long, an I/O error
        return None, error("not-a-file", shown, 1, f"the file cannot be read ({exc.strerror or exc})")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line, col = _line_of_offset(data, exc.start)
        return None, error("not-utf8", shown, line,
                           f"file is not valid UTF-8 (byte 0x{data[exc.start]:02x} at line {line}, column {col}); "
                           "save it as UTF-8", col=col)
    return text.removeprefix("\ufeff"), None


# Files the loader reads itself: their size is checked (as an error) when they are read.
READ_BY_RUNNER = frozenset({"SKILL.md", "evals.json", "trigger-evals.json", "probe.json", "question.md"})


def scan_tree(root: Path, policy: ReadPolicy) -> list[Finding]:
    """Findings for every symlink that leaves the library and every oversized file under root.

    Files the runner reads itself (SKILL.md, eval files) are checked again, as errors, when read;
    here an oversized supporting file is a warning: the host would copy it into every session.
    """
    findings: list[Finding] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        for name in sorted(dirnames + filenames):
            path = here / name
            if path.is_symlink():
                if not policy.inside(path):
                    findings.append(error(
                        "symlink-escape", policy.show(path), 1,
                        f"symlink points outside the library (to {os.readlink(path)}); it is not followed "
                        "and would leak host files into every session. Replace it with a real file."))
                continue
            if name in READ_BY_RUNNER or name not in filenames:
                continue
            if path.is_file() and path.stat().st_size > policy.max_bytes:
                findings.append(warning(
                    "file-too-large", policy.show(path), 1,
                    f"supporting file is {path.stat().st_size:,} bytes, over the {policy.max_bytes:,}-byte "
                    "limit; every session copies the library, so it costs time in each one"))
    return findings


# ---- where the runner writes ------------------------------------------------------------------------------------

def _can_write_in(folder: Path) -> str | None:
    """None when a file can be made in `folder` (tried, then removed: permissions, a read-only or virtual file
    system and a full disk all say no here, where os.access would say yes to root)."""
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".skill-evals-", dir=folder))
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def folder_problem(path: Path) -> str | None:
    """Why a folder cannot be made (or written) at `path`, or None. Checked before anything is started, so a run
    never spends and then fails to write its plan or its results."""
    path = Path(os.path.abspath(path))
    if path.is_symlink() and not path.exists():
        return f"{path} is a symlink to nothing"
    if path.exists():
        if not path.is_dir():
            return f"{path} is a file, not a folder"
        problem = _can_write_in(path)
        return f"{path} cannot be written ({problem})" if problem else None
    existing = path.parent
    while not os.path.lexists(existing) and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        return f"{path} cannot be created: {existing} is not a folder"
    problem = _can_write_in(existing)
    return f"{path} cannot be created: making a folder in {existing} fails ({problem})" if problem else None


def file_problem(path: Path) -> str | None:
    """Why a file cannot be written at `path` (its folder must exist), or None."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        return f"{path} is a folder"
    if not path.parent.is_dir():
        return f"{path} cannot be written: {path.parent} is not a folder"
    problem = _can_write_in(path.parent)
    return f"{path} cannot be written: {path.parent} cannot be written ({problem})" if problem else None
