"""The environment variables each command reads, listed at the end of its --help (its epilog).

A variable changes what a command does without showing on its command line; the help says which ones count, so
that a run on a CI runner and one on a laptop can be told apart by reading, not by guessing.
"""

from __future__ import annotations


def _environment(title: str, *rows: tuple[str, str]) -> str:
    """An epilog that lists the variables, one column for the names ("\\b": click keeps its lines as written);
    "\\n" in a text continues it below."""
    width = max(len(name) for name, _ in rows)
    lines = ["\b", title]
    for name, text in rows:
        first, *more = text.split("\n")
        lines.append(f"  {name:<{width}}  {first}")
        lines += [" " * (width + 4) + line for line in more]
    return "\n".join(lines)


_API_VARIABLES = (
    ("ANTHROPIC_API_KEY", ("the Messages API key; without it nothing is\nsent to a model: every case is UNRUN\n"
                           "(no-credentials), exit 0")),
    ("ANTHROPIC_BASE_URL", "another Messages API endpoint (a proxy)"),
    ("SKILL_EVALS_DISABLED", "1, true or yes: the kill switch (every case\nUNRUN kill-switch, exit 0)"))
_VALIDATOR_VARIABLES = (
    ("SKILL_EVALS_VALIDATOR_SANDBOX", "--validator-sandbox's default"),
    ("SKILL_EVALS_VALIDATOR_IMAGE", "--validator-sandbox container: its image\n(else SKILL_EVALS_IMAGE, else built)"),
    ("DOCKER_HOST", "the Docker daemon a container needs"))
VALIDATE_ENVIRONMENT = _environment("Environment:", *_VALIDATOR_VARIABLES)
PLAN_ENVIRONMENT = _environment("Environment:", *_API_VARIABLES, *_VALIDATOR_VARIABLES)
RUN_ENVIRONMENT = _environment(
    "Environment (no other variable reaches a session; never GITHUB_TOKEN):", *_API_VARIABLES,
    ("SKILL_EVALS_BASE_IMAGE", "--base-image's default"),
    ("SKILL_EVALS_IMAGE", "--container: an image already built or loaded"),
    ("SKILL_EVALS_SOURCE", "--container: the skill-evals source to build"),
    ("CI", "set: no live progress line"),
    ("TMPDIR", "set: session folders go there, not /dev/shm"),
    *_VALIDATOR_VARIABLES)
JUDGE_ENVIRONMENT = _environment(
    "Environment:", ("ANTHROPIC_API_KEY", "the Messages API key (nothing is judged without it)"),
    ("ANTHROPIC_BASE_URL", "another Messages API endpoint (a proxy)"))
CALIBRATE_ENVIRONMENT = _environment("Environment:", *_API_VARIABLES, *_VALIDATOR_VARIABLES)
PUBLISH_ENVIRONMENT = _environment(
    "Environment (what GitHub Actions sets):",
    ("GITHUB_TOKEN", "the token (checks: write, pull-requests: write);\nwithout it nothing is posted to GitHub"),
    ("GITHUB_REPOSITORY", "owner/name; without it nothing is posted"),
    ("GITHUB_SHA", "the commit the check run is on"),
    ("GITHUB_EVENT_PATH", "the event payload: the pull request, its head"),
    ("GITHUB_EVENT_NAME", "pull_request, pull_request_target, ..."),
    ("GITHUB_STEP_SUMMARY", "the job summary file the rollup is appended to"),
    ("GITHUB_RUN_ID", "the workflow run, linked as the check's details"),
    ("GITHUB_API_URL", "the REST API (default https://api.github.com)"),
    ("GITHUB_SERVER_URL", "the web server (default https://github.com)"),
    ("GITHUB_WORKSPACE", "the repository root when git cannot tell it"))
