"""The runner image's entry point: the relay to the API proxy's socket when there is one, then ``skill-evals``.

The Dockerfile's ENTRYPOINT runs this module (``python3 -P -m runner.cli.entrypoint``); the relay itself is
runner.container.apirelay.
"""

from __future__ import annotations

import os
import sys

from runner.cli import main as cli_main
from runner.container.apirelay import SOCKET_ENV, Relay, socket_problem


def main(argv: list[str] | None = None) -> None:
    """The container's entry point: the relay when there is a proxy socket, then ``skill-evals`` ``argv``."""
    socket_path = os.environ.pop(SOCKET_ENV, "")
    if socket_path:
        problem = socket_problem(socket_path)
        if problem is not None:
            print(f"skill-evals: the API proxy's socket {socket_path} cannot be used ({problem}); the runner on "
                  "the host mounts it, so this image is not meant to be given SKILL_EVALS_API_SOCKET by hand",
                  file=sys.stderr)
            sys.exit(2)
        os.environ["ANTHROPIC_BASE_URL"] = Relay(socket_path).start().url
    cli_main(args=sys.argv[1:] if argv is None else argv, prog_name="skill-evals")


if __name__ == "__main__":
    main()
