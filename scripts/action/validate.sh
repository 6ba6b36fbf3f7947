#!/usr/bin/env bash
# The floor, required in every mode: the library's own validator, then `skill-evals validate`.
# Its failure fails the job. The validator is code from the repository under review (on a pull request:
# the pull request's code), so no secret is in this step's environment.
# `floor` (output) says what the errors hold back: none, skills (those skills' or cases' evals are UNRUN and
# the rest still runs, in a job that fails) or library (nothing runs).
set -euo pipefail
unset ANTHROPIC_API_KEY GITHUB_TOKEN GH_TOKEN

summary="${RUNNER_TEMP:-/tmp}/skill-evals-floor.json"
rm -f "$summary"
args=(validate --library "$LIBRARY" --format github --floor-summary "$summary")
if [ -n "${VALIDATOR_COMMAND:-}" ]; then
    args+=(--validator-command "$VALIDATOR_COMMAND")
fi
status=0
skill-evals "${args[@]}" || status=$?
scope=library  # no summary (a usage error, a crash): nothing is known to be safe to run
if [ -f "$summary" ]; then
    scope=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["scope"])' "$summary")
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
