"""The host and its versions in words a person reads (plan, reports), with no heavy import: a report needs
none."""

from __future__ import annotations

from runner.hosts.registry import VERSION_LABELS  # a version key -> the name a person knows it by


def versions_text(versions: dict[str, str]) -> str:
    """`claude-code 2.1.332, claude-agent-sdk 0.2.189`: the host's own version first (a `host` entry is a label,
    shown alone), then the packages it runs on, each `name version`."""
    label = [versions["host"]] if "host" in versions else []
    own = [f"{VERSION_LABELS[key]} {value}" for key, value in versions.items() if key in VERSION_LABELS]
    rest = [f"{key} {value}" for key, value in sorted(versions.items()) if key != "host" and key not in VERSION_LABELS]
    return ", ".join(label + own + rest)


def host_text(host: str, versions: dict[str, str]) -> str:
    """The host and its versions for a person: `claude-code 2.1.332, claude-agent-sdk 0.2.189`; the host's name
    first, then what it runs on (`api-approximation, anthropic 0.75.0`)."""
    shown = versions_text(versions)
    if not shown:
        return host
    return shown if shown.startswith(host) else f"{host} ({shown})"


def host_version(versions: dict[str, str]) -> str:
    """The host program's own version (Claude Code's CLI, an agent CLI), else the SDK the api host runs on."""
    own = next((value for key, value in versions.items() if key in VERSION_LABELS), None)
    return own or versions.get("anthropic") or ""
