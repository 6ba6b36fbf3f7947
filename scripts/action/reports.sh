#!/usr/bin/env bash
# Render the run's HTML report and JUnit XML (`skill-evals report`) into their own folder, uploaded as an
# artifact of their own (small, unlike the run folder with its transcripts) and linked from the check run's
# summary, the PR comment and the job summary. Needs no secret. Never fails the job: a report that could not
# be rendered is a warning, and the run folder (uploaded anyway) has results.json.
set -uo pipefail
unset ANTHROPIC_API_KEY GITHUB_TOKEN GH_TOKEN
. "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"  # the action's files as installed; skill-evals by its path

if [ ! -f "$RUN_DIR/results.json" ]; then
    echo "no results.json in $RUN_DIR: no report to render"
    exit 0
fi
out="$WORK_DIR/$ARTIFACT_NAME-report"
mkdir -p "$out"
status=0
skill-evals report "$RUN_DIR" --format html --out "$out/report.html" || status=$?
skill-evals report "$RUN_DIR" --format junit --out "$out/junit.xml" || status=$?
if [ "$status" -ne 0 ]; then
    echo "::warning::skill-evals report exited $status; the run folder's results.json has every result"
fi
echo "reports-dir=$out" >> "$GITHUB_OUTPUT"
echo "artifact-name=$ARTIFACT_NAME-report" >> "$GITHUB_OUTPUT"
exit 0
