"""The one spelling of the host names.

Settings (`[run] host`) type their field with it below the hosts package, which therefore cannot hold it; the
hosts themselves, their factories and their traits are runner.hosts.registry's, which offers HOST_NAMES to the CLI.
A test holds the registry's names to this Literal, and keeps every other spelling of a host name inside runner/hosts/.
"""

from __future__ import annotations

from typing import Literal

HostName = Literal["claude-code", "api", "first-turn"]
# The host `[run] host` names when the settings name none: the real one.
DEFAULT_HOST: HostName = "claude-code"
