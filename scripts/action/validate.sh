#!/usr/bin/env bash
# The floor, required in every mode: the library's own validator, then `skill-evals validate`.
# Its failure fails the job. The validator is code from the repository under review (on a pull request:
# the pull request's code). It runs in a throwaway container (validator-sandbox: container): no secret, no
# network, the repository read-only, nothing of the runner's reachable. With validator-sandbox: none it runs
# here, as the runner's user: this step then checks, after it, that the action's files are unchanged and that
# nothing was written to GITHUB_ENV or GITHUB_PATH (both would change what later steps run); either stops the
# lane (floor=library). That check catches what got through by mistake; only the container is a boundary.
# `floor` (output) says what the errors hold back: none, skills (those skills' or cases' evals are UNRUN and
# the rest still runs, in a job that fails) or library (nothing runs).
set -euo pipefail
unset ANTHROPIC_API_KEY GITHUB_TOKEN GH_TOKEN
. "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"
# The checker itself, read now (trusted.sh has just checked it): the validator may rewrite the file on disk, not
# this shell's copy.
verifier=$(cat "$GITHUB_ACTION_PATH/scripts/action/verify.py")

summary="${RUNNER_TEMP:-/tmp}/skill-evals-floor.json"
rm -f "$summary"
# --untrusted-settings: settings that would switch the library's validator off, set prices, give sessions tools
# that write, ... are refused by name (exit 2: the floor fails). On a pull request they are the base commit's.
args=(validate --library "$LIBRARY" --format github --floor-summary "$summary"
      --validator-sandbox "${VALIDATOR_SANDBOX:-container}" --untrusted-settings)
if [ -n "${SETTINGS_COMMIT:-}" ]; then
    args+=(--settings-commit "$SETTINGS_COMMIT")
fi
if [ -n "${VALIDATOR_COMMAND:-}" ]; then
    args+=(--validator-command "$VALIDATOR_COMMAND")
fi
status=0
skill-evals "${args[@]}" || status=$?
scope=library  # no summary (a usage error, a crash): nothing is known to be safe to run
if [ -f "$summary" ]; then
    scope=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["scope"])' "$summary")
fi
# What the validator may have done on this machine (validator-sandbox: none): the runner applies GITHUB_ENV and
# GITHUB_PATH to every later step and reads this step's outputs and summary from GITHUB_OUTPUT and
# GITHUB_STEP_SUMMARY. This step has written none of them yet, so anything in them was written by the validator.
tampered=""
for name in GITHUB_ENV GITHUB_PATH GITHUB_OUTPUT GITHUB_STEP_SUMMARY; do
    file="${!name:-}"
    if [ -n "$file" ] && [ -s "$file" ]; then
        tampered="$tampered $name"
        : > "$file"  # emptied: the runner applies nothing of it
    fi
done
if [ -n "$tampered" ]; then
    echo "::error::skill-evals: the library's validator wrote to${tampered} (they change what later steps run); they were emptied, and nothing runs after this step"
fi
if ! "$SKILL_EVALS_PYTHON" -I -c "$verifier" check "$SKILL_EVALS_DIGEST" \
        --dir "${RUNNER_TEMP:-${TMPDIR:-/tmp}}" --bin "$SKILL_EVALS_BIN" --action "$GITHUB_ACTION_PATH"; then
    tampered="$tampered action-files"
fi
if [ -n "$tampered" ]; then
    scope=library
    if [ "$status" -eq 0 ]; then status=1; fi
fi
echo "floor=$scope" >> "$GITHUB_OUTPUT"
if [ "$status" -eq 0 ]; then
    echo "validation=success" >> "$GITHUB_OUTPUT"
elif [ "$scope" = "skills" ]; then
    echo "validation=failure" >> "$GITHUB_OUTPUT"
    {
        echo "**skill-evals: validation failed** (exit status $status): \`skill-evals validate\` reported errors"
        echo "about some skills or cases. Their evals are held back (UNRUN floor-error / invalid-case); the other"
        echo "skills' evals still run. The annotations and this step's log say where."
        echo
    } >> "$GITHUB_STEP_SUMMARY"
else
    echo "validation=failure" >> "$GITHUB_OUTPUT"
    {
        echo "**skill-evals: validation failed** (exit status $status): the library's validator or"
        echo "\`skill-evals validate\` reported an error about the whole library, so no eval was run. The"
        echo "annotations and this step's log say where."
        echo
    } >> "$GITHUB_STEP_SUMMARY"
fi
exit "$status"
