"""Hosts: one fresh session in, an observed transcript out (the interface: base.py).

claude_code.py runs the real CLI; first_turn.py sends Claude Code's first request itself; api.py approximates it over
the Messages API; replay.py rebuilds observations from a run folder. registry.py makes a host by name (its traits
in runner.core.host_traits say which module). Around them: the one activation recogniser (activation.py), each
session's folder, path and walls (workspace.py, sessionpath.py, wall.py, confine.py), what a session cost
(billing.py, cli_spend.py, cli_log.py, prices.py), pacing under rate limits (ratelimit.py), and what the model is
shown of the library (surface.py, measured; listing.py, estimated).
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["agent_install", "api", "base", "billing", "cli_log", "cli_spend", "listing", "prices", "ratelimit",
           "registry", "replay", "sessionpath", "surface", "wall", "workspace"]
