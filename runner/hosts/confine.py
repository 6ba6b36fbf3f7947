"""Confine one session's process tree with Landlock, then exec the host's CLI (a second wall after the first).

Every process of the session reads only the system's folders and its own folder, writes only its own folder, and
cannot reach the runner's processes. Run as a standalone script (stdlib only):
``python -I -S confine.py --write DIR [--read PATH ...] -- CLI ARGS``; it exits 125 without starting the CLI when
the ruleset cannot be applied, so a session is never silently unconfined.

Design notes: docs/design/session-isolation.md.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys

# Every session's CLI starts through this script: it imports what confining needs and no more (json, for --check
# only, is imported by main for it). A module less here is a few milliseconds less for every session.

# Syscall numbers: the same on every architecture since Linux 5.13 (the unified table), except alpha's offsets.
CREATE_RULESET, ADD_RULE, RESTRICT_SELF = 444, 445, 446
CREATE_RULESET_VERSION = 1
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38
PR_CAPBSET_DROP = 24

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR, MAKE_REG = 1 << 4, 1 << 5, 1 << 6, 1 << 7, 1 << 8
MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

# Rights a rule on a regular file may carry (the others are about folders).
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR

# Read (and execute) for every session: the system's programs, libraries and configuration, and the kernel's views
# of the process itself (/proc, /sys). Missing ones are skipped.
SYSTEM_READ = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys")
DEVICES_READ = ("/dev/urandom", "/dev/random", "/dev/zero", "/dev/full", "/dev/tty", "/dev/pts")
DEVICES_WRITE = ("/dev/null",)


class ConfineError(Exception):
    pass


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version(libc: ctypes.CDLL | None = None) -> int:
    """The kernel's Landlock ABI (1 and up); 0 when it has none (not built in, switched off, or refused by a
    seccomp filter)."""
    if not sys.platform.startswith("linux"):
        return 0
    libc = libc or _libc()
    version = libc.syscall(CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))
    return version if version > 0 else 0


def handled_fs(abi: int) -> int:
    """Every filesystem right the kernel's ABI knows: a right left unhandled would stay allowed everywhere."""
    rights = (EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | REMOVE_DIR | REMOVE_FILE | MAKE_CHAR | MAKE_DIR
              | MAKE_REG | MAKE_SOCK | MAKE_FIFO | MAKE_BLOCK | MAKE_SYM)
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneath(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _fail(what: str) -> ConfineError:
    code = ctypes.get_errno()
    return ConfineError(f"{what}: {os.strerror(code) if code else 'failed'}")


def _attr_size(abi: int) -> int:
    # The kernel reads only the fields its ABI knows: older kernels refuse a larger struct with non-zero tails.
    return 8 if abi < 4 else (16 if abi < 6 else 24)


def confine(write: list[str], read: list[str], libc: ctypes.CDLL | None = None) -> int:
    """Restrict this process (and every process it starts) to the rules of the design notes; the ABI used.
    Raises ConfineError when the kernel has no Landlock or a rule cannot be added."""
    libc = libc or _libc()
    abi = abi_version(libc)
    if abi < 1:
        raise ConfineError("this kernel offers no Landlock (Linux 5.13+ with the landlock LSM enabled)")
    handled = handled_fs(abi)
    attr = _RulesetAttr(handled_access_fs=handled, handled_access_net=0,
                        scoped=(SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL) if abi >= 6 else 0)
    ruleset = libc.syscall(CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(_attr_size(abi)), ctypes.c_uint32(0))
    if ruleset < 0:
        raise _fail("landlock_create_ruleset")
    try:
        for path in [*SYSTEM_READ, *DEVICES_READ, *read]:
            _allow(libc, ruleset, path, READ_RIGHTS, required=path in read)
        for path in DEVICES_WRITE:
            _allow(libc, ruleset, path, READ_FILE | WRITE_FILE, required=False)
        for path in write:
            _allow(libc, ruleset, path, handled, required=True)
        if os.geteuid() == 0:
            _drop_capabilities(libc)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            raise _fail("prctl(PR_SET_NO_NEW_PRIVS)")
        if libc.syscall(RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise _fail("landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


def _drop_capabilities(libc: ctypes.CDLL) -> None:
    """Run as root (a CI machine, a root runner): empty the capability bounding set, so the CLI this process execs
    has no capability at all. Without it a root session could still read the runner's /proc/<pid>/environ
    (CAP_SYS_PTRACE passes Landlock's ptrace rule) or override file permissions."""
    try:
        with open("/proc/sys/kernel/cap_last_cap", encoding="ascii") as handle:
            last = int(handle.read().strip())
    except (OSError, ValueError):
        last = 40
    for cap in range(last + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise _fail(f"prctl(PR_CAPBSET_DROP, {cap})")


def _allow(libc: ctypes.CDLL, ruleset: int, path: str, rights: int, required: bool) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError as exc:
        if required:
            raise ConfineError(f"{path}: {exc.strerror}") from None
        return
    try:
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            rights &= FILE_RIGHTS
        rule = _PathBeneath(allowed_access=rights, parent_fd=fd)
        if libc.syscall(ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule),
                        ctypes.c_uint32(0)) != 0:
            raise _fail(f"landlock_add_rule {path}")
    finally:
        os.close(fd)


def _probe(write: list[str], denied: list[str]) -> dict[str, object]:
    """After confining: may the session's folder be written, and are the `denied` paths unreadable?"""
    found: dict[str, object] = {"write": False, "denied": {}}
    if write:
        target = os.path.join(write[0], ".skill-evals-confine-probe")
        try:
            with open(target, "w", encoding="utf-8") as handle:
                handle.write("probe")
            os.unlink(target)
            found["write"] = True
        except OSError as exc:
            found["write_error"] = exc.strerror
    denied_map: dict[str, bool] = {}
    for path in denied:
        try:
            if os.path.isdir(path):
                os.listdir(path)
            else:
                with open(path, "rb") as handle:
                    handle.read(1)
            denied_map[path] = False
        except OSError as exc:
            denied_map[path] = exc.errno in (errno.EACCES, errno.EPERM)
    found["denied"] = denied_map
    return found


def _parse(argv: list[str]) -> tuple[list[str], list[str], list[str], bool, list[str]]:
    write: list[str] = []
    read: list[str] = []
    denied: list[str] = []
    check = False
    index = 0
    while index < len(argv):
        arg = argv[index]
        if arg == "--":
            return write, read, denied, check, argv[index + 1:]
        if arg == "--check":
            check = True
        elif arg in ("--write", "--read", "--denied") and index + 1 < len(argv):
            {"--write": write, "--read": read, "--denied": denied}[arg].append(argv[index + 1])
            index += 1
        else:
            raise ConfineError(f"unknown argument {arg!r}")
        index += 1
    return write, read, denied, check, []


def main(argv: list[str]) -> int:
    try:
        write, read, denied, check, command = _parse(argv)
        if check:
            import json  # before the ruleset, which keeps this process from reading the standard library
        abi = confine(write, read)
    except ConfineError as exc:
        print(f"skill-evals confine: the session was not started: {exc}", file=sys.stderr)
        return 125
    if check:
        print(json.dumps({"abi": abi, **_probe(write, denied)}))
        return 0
    if not command:
        print("skill-evals confine: no command after --", file=sys.stderr)
        return 125
    try:
        os.execv(command[0], command)
    except OSError as exc:
        print(f"skill-evals confine: cannot start {command[0]}: {exc.strerror}", file=sys.stderr)
        return 125
    return 125  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
