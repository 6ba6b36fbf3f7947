#!/usr/bin/env bash
# Publish the results: the check run, one PR comment updated in place, the job summary
# (`skill-evals publish`, which never fails for what GitHub answers: on a fork's read-only token it writes
# the job summary only). With `publish: false` (e.g. one shard of many) the job summary only.
#
#   publish.sh start   before the run: the check run `in_progress` (its id is the step output check-run-id),
#                      so the pull request shows the evals running; when another job already made the commit's
#                      check run, its id (one check run per commit). Never fails the job (a fork's read-only
#                      token, a missing `checks: write`): there is then no check run in progress, that is all.
#   publish.sh         after the run: completes that check run (or one found by commit) with the results,
#                      links the uploaded reports (REPORTS_URL, RUN_FOLDER_URL: the artifacts' URLs), and
#                      makes annotation paths relative to the repository root (--library). A run that left no
#                      results.json still completes the started check run ("no results"), never leaving it
#                      in progress.
set -uo pipefail
unset ANTHROPIC_API_KEY
. "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"  # the action's files as installed; skill-evals by its path

if [ "${1:-}" = "start" ]; then
    echo "check-run-id=" >> "$GITHUB_OUTPUT"
    if [ "${PUBLISH:-true}" != "true" ]; then
        echo "publish: false: no check run is started"
        exit 0
    fi
    status=0
    out=$(skill-evals publish --start) || status=$?
    echo "$out"
    if [ "$status" -ne 0 ]; then
        echo "::warning::skill-evals publish --start exited $status; the check run is created when the run ends"
        exit 0
    fi
    id=$(printf '%s' "$out" | python3 -c 'import json, sys
value = json.load(sys.stdin).get("check_run_id")
print(value if isinstance(value, int) else "")') || id=""
    echo "check-run-id=$id" >> "$GITHUB_OUTPUT"
    exit 0
fi

status=0
if [ ! -f "$RUN_DIR/results.json" ]; then
    if [ -n "${CHECK_RUN_ID:-}" ]; then
        skill-evals publish "$RUN_DIR" --mode "$MODE" --check-run-id "$CHECK_RUN_ID" || status=$?
    else
        echo "no results.json in $RUN_DIR: nothing to publish"
    fi
elif [ "${PUBLISH:-true}" = "true" ]; then
    args=(publish "$RUN_DIR" --mode "$MODE" --library "${LIBRARY:-.}")
    if [ "${COMMENT:-true}" != "true" ]; then args+=(--no-comment); fi
    if [ -n "${CHECK_RUN_ID:-}" ]; then args+=(--check-run-id "$CHECK_RUN_ID"); fi
    if [ -n "${REPORTS_URL:-}" ]; then args+=(--link "HTML report and JUnit XML=$REPORTS_URL"); fi
    if [ -n "${RUN_FOLDER_URL:-}" ]; then args+=(--link "run folder=$RUN_FOLDER_URL"); fi
    skill-evals "${args[@]}" || status=$?
fi
if [ "$status" -ne 0 ]; then
    echo "::warning::skill-evals publish exited $status"
fi
# The job summary always carries the report: publish writes it; without publish (or if it failed
# before writing) the report is rendered here from the same results.json.
if [ -f "$RUN_DIR/results.json" ] && [ ! -s "$GITHUB_STEP_SUMMARY" ]; then
    skill-evals report "$RUN_DIR" --format markdown >> "$GITHUB_STEP_SUMMARY" || true
fi
# improve: true — the description suggestions the run step's `skill-evals improve` left in the run folder
# ($RUN_DIR/improve/<skill>/): a `better` one is posted, any other verdict posts nothing (and withdraws an earlier
# suggestion for that skill); the job summary says why. Never a commit. After the report above, so its lines never
# stand in for the report in the summary check. The summary then says where the evidence is: the run folder artifact.
if [ "${IMPROVE:-false}" = "true" ] && [ -d "$RUN_DIR/improve" ]; then
    folders=()
    names=()
    for record in "$RUN_DIR"/improve/*/improve.json; do
        if [ -f "$record" ]; then
            folders+=(--improve "$(dirname "$record")")
            names+=("improve/$(basename "$(dirname "$record")")/")
        fi
    done
    if [ "${#folders[@]}" -gt 0 ] && [ "${PUBLISH:-true}" = "true" ]; then
        skill-evals publish "${folders[@]}" --library "${LIBRARY:-.}" \
            || echo "::warning::skill-evals publish --improve exited $?"
    fi
    if [ "${#names[@]}" -gt 0 ]; then
        where="the run folder artifact"
        if [ -n "${RUN_FOLDER_URL:-}" ]; then where="the [run folder artifact]($RUN_FOLDER_URL)"; fi
        printf '> **skill-evals improve output** (improve.json, SKILL.md.diff and the runs behind them): %s of %s.\n\n' \
            "${names[*]}" "$where" >> "$GITHUB_STEP_SUMMARY"
    fi
fi
echo "status=$status" >> "$GITHUB_OUTPUT"
exit 0
