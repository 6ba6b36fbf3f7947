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
exit 0
