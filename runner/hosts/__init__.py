"""Hosts: a session in, an observed transcript out. See runner.hosts.base for the interface."""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["api", "base", "billing", "cli_log", "cli_spend", "listing", "prices", "ratelimit",
           "registry", "replay", "sessionpath", "surface", "wall", "workspace"]
