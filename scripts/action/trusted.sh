# shellcheck shell=bash
# Sourced first by every step script that runs skill-evals (validate, select, run, publish):
#
#   . "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"
#
# 1. Checks the action's files against the digest the install step recorded as a step output (verify.py: the
#    virtual environment, the action's scripts and the image's sources); on a difference the step stops here,
#    with the changed files named, before any secret is handed to anything.
# 2. Binds `skill-evals` and `python3` (shell functions, which win over PATH) to the absolute paths recorded at
#    install: whatever a later PATH, GITHUB_PATH or GITHUB_ENV says, these scripts run the action's own.
# 3. Exports PYTHONDONTWRITEBYTECODE, so no run writes .pyc files into the environment the digest covers.
#
# With `install: false` the job's own skill-evals is used: its path is still fixed at install, but what it is
# (and its verification) is the workflow's business; only the action's scripts are checked.
# This catches tampering by code that does not know about it; the boundary is the validator's sandbox.

if [ -z "${SKILL_EVALS_BIN:-}" ] || [ -z "${SKILL_EVALS_PYTHON:-}" ] || [ -z "${SKILL_EVALS_DIGEST:-}" ]; then
    echo "::error::skill-evals: the install step's outputs (skill-evals path, python, digest) did not reach this step; the install step must run first, with id install"
    exit 1
fi
"$SKILL_EVALS_PYTHON" -I "$GITHUB_ACTION_PATH/scripts/action/verify.py" check "$SKILL_EVALS_DIGEST" \
    --dir "${RUNNER_TEMP:-${TMPDIR:-/tmp}}" --bin "$SKILL_EVALS_BIN" --action "$GITHUB_ACTION_PATH" || exit 1
export PYTHONDONTWRITEBYTECODE=1

skill-evals() { "$SKILL_EVALS_BIN" "$@"; }
python3() { "$SKILL_EVALS_PYTHON" -I "$@"; }
