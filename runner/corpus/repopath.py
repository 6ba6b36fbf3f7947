"""Paths as GitHub reads them: from the repository's root, not from the library's.

Everything skill-evals shows (findings, results.json's `file`) is relative to the library's root, the
folder `--library` resolves to. GitHub resolves an annotation's path (a check run annotation, a workflow
command's `file=`) from the repository's root instead, so a library in `examples/library` must be annotated
as `examples/library/.claude/skills/...`, or GitHub attaches nothing to the diff. The repository's root is
git's top level for the library (which is also right when actions/checkout put the repository in a
subfolder of the workspace), else GITHUB_WORKSPACE when it holds the library, else unknown (no prefix).
"""

from __future__ import annotations

import os
import posixpath
import subprocess
from pathlib import Path, PurePosixPath
from typing import Mapping


def repository_root(folder: Path, environ: Mapping[str, str] | None = None) -> Path | None:
    """The root of the repository holding `folder`: git's top level, else GITHUB_WORKSPACE when it holds it."""
    env = os.environ if environ is None else environ
    folder = folder.resolve()
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel"], capture_output=True,
                              text=True, timeout=30, check=False, env={**env, "GIT_TERMINAL_PROMPT": "0"})
        if done.returncode == 0 and done.stdout.strip():
            return Path(done.stdout.strip()).resolve()
    except (OSError, subprocess.SubprocessError):  # no git, or git that hangs: the workspace is the next best
        pass
    workspace = env.get("GITHUB_WORKSPACE")
    if workspace:
        root = Path(workspace).resolve()
        if folder == root or root in folder.parents:
            return root
    return None


def prefix(library_root: Path, environ: Mapping[str, str] | None = None) -> str:
    """The library root's path inside its repository, ending in "/" ("" at the root or when unknown)."""
    root = repository_root(library_root, environ)
    if root is None:
        return ""
    relative = library_root.resolve().relative_to(root).as_posix()
    return "" if relative == "." else relative + "/"


def join(prefix_: str, path: str) -> str:
    """`path` (relative to the library root) from the repository root; an absolute path is left alone."""
    if not prefix_ or not path or PurePosixPath(path).is_absolute():
        return path
    return posixpath.normpath(prefix_ + path)
