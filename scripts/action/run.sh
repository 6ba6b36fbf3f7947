#!/usr/bin/env bash
# Execute the selected cases: `skill-evals run`, in the action's container unless `container: false`.
# The only step that holds the Anthropic key. Its exit status is recorded and judged by the gate step,
# so in advisory mode eval results never fail the job. It runs only the action's own code: trusted.sh checks
# the install step's digest first (a difference stops the step before the key is handed to anything), and
# --untrusted-settings refuses a repository's settings that would pick a program to run beside the key.
set -uo pipefail
unset GITHUB_TOKEN GH_TOKEN
. "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"

echo "run-dir=$RUN_DIR" >> "$GITHUB_OUTPUT"
# The validate step already ran the library's validator without secrets; it is not run again here,
# where the API key is in this process's environment.
args=(run --library "$LIBRARY" --tier "$TIER" --out "$RUN_DIR" --no-library-validator --untrusted-settings)
add() {  # add OPTION VALUE, when the value is not empty
    if [ -n "$2" ]; then args+=("$1" "$2"); fi
}
add --base "${BASE:-}"
add --head "${HEAD:-}"
add --shard "${SHARD:-}"
add --model "${MODEL:-}"
add --judge-model "${JUDGE_MODEL:-}"
add --repeats "${REPEATS:-}"
add --quorum "${QUORUM:-}"
add --max-usd "${MAX_USD:-}"
add --listing-budget "${LISTING_BUDGET:-}"
if [ "${CONTAINER:-true}" = "true" ] && [ -z "${SKILL_EVALS_NO_CONTAINER:-}" ]; then
    args+=(--container)
fi
status=0
skill-evals "${args[@]}" || status=$?
echo "exit-code=$status" >> "$GITHUB_OUTPUT"
if [ "$status" -ne 0 ]; then
    echo "::warning::skill-evals run exited $status (mode ${MODE}); see above"
fi
exit 0
