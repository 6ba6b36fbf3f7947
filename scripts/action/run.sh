#!/usr/bin/env bash
# Execute the selected cases: `skill-evals run`, in the action's container unless `container: false`.
# The only step that holds the Anthropic key. Its exit status is recorded and judged by the gate step,
# so in advisory mode eval results never fail the job. It runs only the action's own code: trusted.sh checks
# the install step's digest first (a difference stops the step before the key is handed to anything), and
# --untrusted-settings refuses a repository's settings that are control, not data (a program to run beside the
# key, prices, a higher cap, tools that write, ...: runner.corpus.trust).
# With `improve: true` it then runs `skill-evals improve` for the skills the pr tier touched (below).
set -uo pipefail
unset GITHUB_TOKEN GH_TOKEN
. "$GITHUB_ACTION_PATH/scripts/action/trusted.sh"

echo "run-dir=$RUN_DIR" >> "$GITHUB_OUTPUT"
# The validate step already ran the library's validator without secrets; it is not run again here,
# where the API key is in this process's environment.
args=(run --library "$LIBRARY" --tier "$TIER" --out "$RUN_DIR" --no-library-validator --untrusted-settings)
# On a pull request, the settings of its base commit (the pull request's own take effect after the merge).
add() {  # add OPTION VALUE, when the value is not empty
    if [ -n "$2" ]; then args+=("$1" "$2"); fi
}
add --base "${BASE:-}"
add --head "${HEAD:-}"
add --shard "${SHARD:-}"
# One host, or several comma-separated: `run --host a,b` checks each name and runs the same cases on each.
add --host "${HOSTS:-}"
add --model "${MODEL:-}"
add --judge-model "${JUDGE_MODEL:-}"
add --repeats "${REPEATS:-}"
add --quorum "${QUORUM:-}"
add --verdict "${VERDICT:-}"
add --max-usd "${MAX_USD:-}"
add --listing-budget "${LISTING_BUDGET:-}"
add --settings-commit "${SETTINGS_COMMIT:-}"
# The result cache (the restore step put GitHub's copy there): a pull request's run only reads it.
if [ -n "${CACHE_DIR:-}" ]; then
    args+=(--cache "$CACHE_DIR" --cache-label "${CACHE_LABEL:-}")
    if [ "${CACHE_READ_ONLY:-false}" = "true" ]; then args+=(--cache-read-only); fi
fi
if [ "${CONTAINER:-true}" = "true" ] && [ -z "${SKILL_EVALS_NO_CONTAINER:-}" ]; then
    args+=(--container)
fi
status=0
skill-evals "${args[@]}" || status=$?
echo "exit-code=$status" >> "$GITHUB_OUTPUT"
if [ "$status" -ne 0 ]; then
    echo "::warning::skill-evals run exited $status (mode ${MODE:-}); see above"
fi

# improve: true — look for a better description of each skill the pr tier's selection touched, in this step
# because it is the one that holds the key, under what is left of the run's cap (results.json: cap minus spend).
# Each skill gets what the skills before it left. The API host: improve has no container mode, and that host
# executes nothing from the repository (its tools only read), so no repository code runs beside the key.
# The suggestions are posted by the publish step (`skill-evals publish --improve`), which holds the token.
# Each skill's output goes into the run folder ($RUN_DIR/improve/<skill>/: improve.json, SKILL.md.diff, runs/), so
# the run folder artifact carries the evidence behind a suggestion (or behind withdrawing one).
if [ "${IMPROVE:-false}" = "true" ]; then
    if [ "${TIER:-}" != "pr" ] || [ -z "${ANTHROPIC_API_KEY:-}" ] || [ ! -f "$RUN_DIR/results.json" ] \
            || [ ! -f "${SELECTION:-}" ]; then
        echo "improve: skipped (it needs the pr tier, a key, the run's results.json and the selection)"
        exit 0
    fi
    mapfile -t skills < <(python3 - "$SELECTION" <<'PY'
import json, sys
data = json.load(open(sys.argv[1], encoding="utf-8"))
selected = {case.get("skill") for case in data.get("cases") or []}
for name in data.get("changed_skills") or []:
    if name in selected:
        print(name)
PY
)
    for skill in "${skills[@]}"; do
        left=$(python3 - "$RUN_DIR/results.json" "$RUN_DIR/improve" <<'PY'
import json, pathlib, sys
results = json.load(open(sys.argv[1], encoding="utf-8"))
spend = results.get("hosts") or results["spend"]  # several hosts: the run's cap and every host's spend
left = float(spend["cap_usd"]) - float(spend["spend_usd" if "spend_usd" in spend else "usd"])
for record in pathlib.Path(sys.argv[2]).glob("*/improve.json"):
    left -= float(json.loads(record.read_text(encoding="utf-8"))["spend"]["usd"])
print(f"{max(left, 0.0):.4f}")
PY
) || left="0"
        if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0 else 1)' "$left"; then
            improve=(improve "$skill" --library "$LIBRARY" --out "$RUN_DIR/improve/$skill" --max-usd "$left"
                     --host api --no-library-validator --untrusted-settings)
            if [ -n "${MODEL:-}" ]; then improve+=(--model "$MODEL"); fi
            if [ -n "${SETTINGS_COMMIT:-}" ]; then improve+=(--settings-commit "$SETTINGS_COMMIT"); fi
            skill-evals "${improve[@]}" || echo "::warning::skill-evals improve $skill exited $?; no suggestion for it"
        else
            echo "improve $skill: skipped, the run left nothing of the cap"
        fi
    done
fi
exit 0
