"""`skill-evals improve SKILL`: a description improvement loop that cannot overfit (issue 18).

What enters: a loaded `Library`, its `Settings`, one skill's name, the credentials, and the loop's bounds (host,
model, N and k, rounds, candidates per round, the spend cap, a seed). What leaves: an `Improve` (model.py), written
as improve.json, with a unified diff of SKILL.md when a candidate was chosen. Nothing in the library is modified:
every candidate is evaluated in a temporary copy of the library, through the ordinary run pipeline
(runner.pipeline.run: prepare, write_plan, execute), one run folder per evaluation under the improve folder.

The stages, each a module:
- split.py — the skill's trigger cases (trigger, refusal, no_trigger, discrimination) split into train and held-out
  test, stratified by kind, deterministic from a recorded seed; and the neighbours' own cases.
- propose.py — the proposer: one Messages API call with structured output, built ONLY from the train cases and
  their train verdicts, the current description and the neighbours' descriptions. It reserves its worst case
  against the loop's ledger before the call and settles after.
- loop.py — rounds on train, the stop rules, best on train, the neighbour check, then ONE scoring on test of the
  chosen candidate against the current description (Wilson intervals), and the plan shown when no key is present.
- model.py — the pydantic models of improve.json.
- render.py — the terminal table and the unified diff.
"""

# The modules other stages may import: what crosses this stage's boundary (tests/test_architecture.py keeps
# this list true both ways).
__all__ = ["loop", "model", "propose", "render", "skillmd"]
