#!/usr/bin/env bash
# The floor, required in every mode: the library's own validator, then `skill-evals validate`.
# Its failure fails the job. The validator is code from the repository under review (on a pull request:
# the pull request's code), so no secret is in this step's environment.
set -euo pipefail
unset ANTHROPIC_API_KEY GITHUB_TOKEN GH_TOKEN

args=(validate --library "$LIBRARY" --format github)
if [ -n "${VALIDATOR_COMMAND:-}" ]; then
    args+=(--validator-command "$VALIDATOR_COMMAND")
fi
status=0
skill-evals "${args[@]}" || status=$?
if [ "$status" -eq 0 ]; then
    echo "validation=success" >> "$GITHUB_OUTPUT"
else
    echo "validation=failure" >> "$GITHUB_OUTPUT"
    {
        echo "**skill-evals: validation failed** (exit status $status): the library's validator or"
        echo "\`skill-evals validate\` reported an error, so no eval was run. The annotations and this step's"
        echo "log say where."
        echo
    } >> "$GITHUB_STEP_SUMMARY"
fi
exit "$status"
