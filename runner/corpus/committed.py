"""The settings file as a commit holds it (`--settings-commit REV`), instead of the working tree's.

The GitHub Action passes a pull request's base commit: the pull request then runs under the settings it would be
merged into, and whatever it changes in `.skill-evals.toml` takes effect after the merge, once reviewed. The file is
taken from git (`git cat-file`), never from the working tree the pull request wrote; a commit without it means the
defaults. It is written to a private temporary folder so that it is read like any settings file (bounded, line
numbers), and findings show it as `REV:path`.
"""

from __future__ import annotations

import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from runner.core.errors import UsageError
from runner.corpus.settings import SETTINGS_FILE

# Past any real settings file; a larger blob is refused before it is written anywhere.
MAX_BYTES = 1_048_576
_GIT_TIMEOUT_S = 60


class CommitError(UsageError):
    """--settings-commit names nothing this repository can give: a usage error with what to do."""


@dataclass
class Committed:
    commit: str  # the full commit id REV resolved to
    shown: str  # how findings and messages name the file: `<commit 12>:<path in the repository>`
    path: Path | None  # a file holding the commit's settings; None: the commit has none (the defaults)
    # Keeps `path` as long as this object lives; the folder is removed with it.
    folder: tempfile.TemporaryDirectory[str] | None = field(default=None, repr=False)


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, timeout=_GIT_TIMEOUT_S,
                              check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CommitError(f"--settings-commit: git could not be run in {root}: {exc}") from None


def read(root: Path, rev: str) -> Committed:
    """The settings file of the repository at `root` as commit `rev` holds it. Raises CommitError."""
    return read_file(root, rev, SETTINGS_FILE, MAX_BYTES)


def read_file(root: Path, rev: str, relative: str, max_bytes: int) -> Committed:
    """A file of the repository at `root` (`relative` to it) as commit `rev` holds it: the settings file, or the
    quarantine list, which a pull request could otherwise use to hide its own failing cases. Raises CommitError."""
    if not rev or rev.startswith("-"):
        raise CommitError(f"--settings-commit {rev!r}: give a commit (a sha, a branch, a tag)")
    found = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{rev}^{{commit}}")
    if found.returncode != 0:
        raise CommitError(f"--settings-commit {rev}: no such commit in the repository at {root} (a shallow "
                          "checkout? fetch it, e.g. actions/checkout with fetch-depth: 0)")
    commit = found.stdout.decode().strip()
    prefix = _git(root, "rev-parse", "--show-prefix")  # the root's folder inside the git repository
    if prefix.returncode != 0:
        raise CommitError(f"--settings-commit: {root} is not in a git repository")
    name = prefix.stdout.decode("utf-8", "surrogateescape").strip() + relative
    shown = f"{commit[:12]}:{name}"
    # `<mode> <type> <object>\t<path>`, or nothing when the commit has no such path.
    listed = _git(root, "ls-tree", "--full-tree", commit, "--", name)
    entry = listed.stdout.decode("utf-8", "surrogateescape").split("\t", 1)[0].split()
    if listed.returncode != 0 or not entry:
        return Committed(commit=commit, shown=shown, path=None)
    mode, kind, blob = entry
    if kind != "blob" or mode not in ("100644", "100755"):
        raise CommitError(f"--settings-commit: {shown} is not a regular file in that commit (mode {mode})")
    size = _git(root, "cat-file", "-s", blob)
    if size.returncode != 0 or int(size.stdout.decode().strip() or 0) > max_bytes:
        raise CommitError(f"--settings-commit: {shown} is over {max_bytes:,} bytes; it was not read")
    content = _git(root, "cat-file", "blob", blob)
    if content.returncode != 0:
        raise CommitError(f"--settings-commit: git could not read {shown}")
    folder = tempfile.TemporaryDirectory(prefix="skill-evals-settings-")
    path = Path(folder.name) / Path(relative).name
    path.write_bytes(content.stdout)
    return Committed(commit=commit, shown=shown, path=path, folder=folder)
