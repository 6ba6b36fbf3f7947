#!/usr/bin/env bash
# Which cases this tier runs, and why (`skill-evals select`, JSON). Part of the eval lane: a failure is
# recorded (status output) and judged by the gate step, never here. No secret is needed to read files.
set -uo pipefail
unset ANTHROPIC_API_KEY GITHUB_TOKEN GH_TOKEN
. "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"  # the action's files as installed; skill-evals by its path

selection="$WORK_DIR/selection.json"
args=(select --library "$LIBRARY" --tier "$TIER" --format json)
if [ -n "${BASE:-}" ]; then args+=(--base "$BASE"); fi
if [ -n "${HEAD:-}" ]; then args+=(--head "$HEAD"); fi
if [ -n "${SETTINGS_COMMIT:-}" ]; then args+=(--settings-commit "$SETTINGS_COMMIT"); fi
status=0
skill-evals "${args[@]}" > "$selection" || status=$?
echo "status=$status" >> "$GITHUB_OUTPUT"
if [ "$status" -ne 0 ]; then
    echo "::warning::skill-evals select exited $status; the run step makes (and reports) the same selection"
    exit 0
fi
echo "selection-path=$selection" >> "$GITHUB_OUTPUT"
python3 - "$selection" <<'PY'
import json, sys
data = json.load(open(sys.argv[1], encoding="utf-8"))
cases = data.get("cases") or []
print(f"tier {data.get('tier')}: {len(cases)} case(s) selected; {data.get('note', '')}".rstrip("; "))
for case in cases[:50]:
    print(f"  {case.get('uid')}: {case.get('why')}")
if len(cases) > 50:
    print(f"  ... {len(cases) - 50} more in selection.json (uploaded with the run folder)")
PY
# A pull request that changes the settings file runs under its base commit's: the job summary says so.
if [ -n "${SETTINGS_COMMIT:-}" ]; then
    python3 - "$selection" "$SETTINGS_COMMIT" >> "$GITHUB_STEP_SUMMARY" <<'PY'
import json, sys
data = json.load(open(sys.argv[1], encoding="utf-8"))
if ".skill-evals.toml" in (data.get("changed_paths") or []):
    print(f"**skill-evals: this pull request changes `.skill-evals.toml`.** The evals ran under the settings of "
          f"its base commit ({sys.argv[2][:12]}), not the pull request's: its settings changes take effect after "
          "it is merged.\n")
PY
fi
exit 0
