"""Case kinds and assertion classes: what a case measures and how an assertion is decided, in one definition.

The corpus gives each case its kind (runner.corpus.classify), the plan costs by kind, results and every report
group by it, `[[case_override]]` sets it; all of them read these types.
"""

from __future__ import annotations

from typing import Literal

# Case kinds (semantics §2): what a case measures. The one definition: corpus, plan, results and overrides use it.
CaseKind = Literal["trigger", "refusal", "no_trigger", "discrimination", "probe"]
# A case the loader read but the runner cannot run: a type it does not know (`unknown`) or an item that breaks its
# format's schema (`invalid`). The floor holds these back (UNRUN floor-error); they never reach a host.
BrokenKind = Literal["unknown", "invalid"]
LoadedKind = Literal[CaseKind, BrokenKind]
AssertionClass = Literal["activation", "artifact_shape", "semantic", "unjudgeable"]
