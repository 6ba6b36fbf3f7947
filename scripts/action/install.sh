#!/usr/bin/env bash
# Install skill-evals from this action's own checkout into a virtual environment of its own, and put it
# on PATH for the following steps. With `install: false` the job's own `skill-evals` is used instead.
set -euo pipefail

if [ "${INSTALL:-true}" = "false" ]; then
    if ! command -v skill-evals >/dev/null 2>&1; then
        echo "::error::skill-evals: install is false, but no skill-evals is on PATH"
        exit 1
    fi
    echo "install: false; using $(command -v skill-evals) ($(skill-evals --version))"
    exit 0
fi

if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "::error::skill-evals needs Python >= 3.11 (found $(python3 --version 2>&1)); add actions/setup-python first"
    exit 1
fi
venv="${RUNNER_TEMP:-${TMPDIR:-/tmp}}/skill-evals-venv"
python3 -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$GITHUB_ACTION_PATH"
echo "$venv/bin" >> "$GITHUB_PATH"
"$venv/bin/skill-evals" --version
