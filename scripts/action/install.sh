#!/usr/bin/env bash
# Install skill-evals from this action's own checkout into a virtual environment of its own (also put on PATH
# for the workflow's later steps). With `install: false` the job's own `skill-evals` is used instead.
#
# This step runs before any code of the repository under review. Its outputs fix, for every later step:
#   skill-evals  the absolute path of the skill-evals they run (never looked up on PATH again)
#   python       the absolute path of the interpreter that checks the digest (verify.py, `python3 -I`)
#   digest       SHA-256 of the virtual environment and of the action's own scripts and sources (verify.py);
#                a step output, which no later step can change. trusted.sh checks it before each later step.
set -euo pipefail

temp="${RUNNER_TEMP:-${TMPDIR:-/tmp}}"
if ! python3 -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)'; then
    echo "::error::skill-evals needs Python >= 3.11 (found $(python3 --version 2>&1)); add actions/setup-python first"
    exit 1
fi
python=$(python3 -c 'import sys; print(sys.executable)')

venv=""
if [ "${INSTALL:-true}" = "false" ]; then
    if ! binary=$(command -v skill-evals); then
        echo "::error::skill-evals: install is false, but no skill-evals is on PATH"
        exit 1
    fi
    case "$binary" in
        /*) ;;
        *) echo "::error::skill-evals: install is false, and skill-evals is found at a relative path ($binary); put an absolute folder on PATH"
           exit 1 ;;
    esac
    echo "install: false; using $binary ($("$binary" --version)); checking it is the workflow's business"
else
    venv="$temp/skill-evals-venv"
    python3 -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$GITHUB_ACTION_PATH"
    echo "$venv/bin" >> "$GITHUB_PATH"
    binary="$venv/bin/skill-evals"
    PYTHONDONTWRITEBYTECODE=1 "$binary" --version
fi

# The agent CLIs the `hosts` input's hosts drive (OpenCode, Codex, Gemini CLI, Copilot CLI), from npm at their pinned
# versions, into the virtual environment's folder: the digest below covers them, so no later step can swap one.
if [ -n "${HOSTS:-}" ]; then
    if [ -n "$venv" ]; then
        agents="$venv/agent-clis"
        echo "SKILL_EVALS_AGENT_CLIS=$agents" >> "$GITHUB_ENV"
        SKILL_EVALS_AGENT_CLIS="$agents" "$binary" hosts install --for-hosts "$HOSTS"
    else
        "$binary" hosts install --for-hosts "$HOSTS"
    fi
fi

record=(record --dir "$temp" --bin "$binary" --action "$GITHUB_ACTION_PATH")
if [ -n "$venv" ]; then record+=(--venv "$venv"); fi
digest=$("$python" -I "$GITHUB_ACTION_PATH/scripts/action/verify.py" "${record[@]}")
{
    echo "skill-evals=$binary"
    echo "python=$python"
    echo "digest=$digest"
} >> "$GITHUB_OUTPUT"
echo "digest of the action's files (checked before every later step): $digest"
