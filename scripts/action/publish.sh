#!/usr/bin/env bash
# Publish the results: the check run, one PR comment updated in place, the job summary
# (`skill-evals publish`, which never fails for what GitHub answers: on a fork's read-only token it writes
# the job summary only). With `publish: false` (e.g. one shard of many) the job summary only.
set -uo pipefail
unset ANTHROPIC_API_KEY

status=0
if [ ! -f "$RUN_DIR/results.json" ]; then
    echo "no results.json in $RUN_DIR: nothing to publish"
elif [ "${PUBLISH:-true}" = "true" ]; then
    args=(publish "$RUN_DIR" --mode "$MODE")
    if [ "${COMMENT:-true}" != "true" ]; then args+=(--no-comment); fi
    skill-evals "${args[@]}" || status=$?
    if [ "$status" -ne 0 ]; then
        echo "::warning::skill-evals publish exited $status"
    fi
fi
# The job summary always carries the report: publish writes it; without publish (or if it failed
# before writing) the report is rendered here from the same results.json.
if [ -f "$RUN_DIR/results.json" ] && [ ! -s "$GITHUB_STEP_SUMMARY" ]; then
    skill-evals report "$RUN_DIR" --format markdown >> "$GITHUB_STEP_SUMMARY" || true
fi
echo "status=$status" >> "$GITHUB_OUTPUT"
exit 0
