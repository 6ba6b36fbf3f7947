"""`run --container`: the run inside the runner image, started from here.

The container has no git, no Docker and no API key: what needs them happens on this machine first (the
selection of a pr or cadence tier, a sandboxed library validator), the key stays in a proxy here, and the
options are given again to the `run` inside with the paths it sees (/repo, /out).
"""

from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import click

from runner.cli import context
from runner.cli.app import fail_usage
from runner.core.host_traits import HOST_TRAITS
from runner.corpus import bounded, trust
from runner.floor import gate as floor_mod

# `run --container --settings-commit REV`: the commit's settings file, in the run folder.
COMMITTED_SETTINGS = "settings.toml"
COMMITTED_QUARANTINE = "quarantine.json"


def _forwarded_args(drop: set[str]) -> list[str]:
    """The options this `run` was given, to repeat them inside the container (paths are remapped)."""
    ctx = click.get_current_context()
    args: list[str] = []
    for param in ctx.command.params:
        if not isinstance(param, click.Option) or param.name in drop:
            continue
        value = ctx.params.get(param.name)
        if value is None or value is False or value == ():
            continue
        flag = param.opts[0]
        if param.is_flag:
            args.append(flag)
        elif isinstance(value, tuple):
            for item in value:
                args += [flag, str(item)]
        else:
            args += [flag, str(value)]
    return args


def cache_folder(params: dict[str, object], loaded: context.Loaded, root: Path) -> Path | None:
    """The result cache folder of this run, on this machine (mounted into the container): --cache, else the
    settings' [run] cache relative to the repository; none with --no-cache or --resume (a resume uses none)."""
    if params.get("no_cache") or params.get("resume_dir"):
        return None
    given = params.get("cache")
    if isinstance(given, Path):
        return given.resolve()
    return (root / loaded.settings.run.cache).resolve() if loaded.settings.run.cache else None


def container_agents(option: object, configured: str) -> tuple[str, ...]:
    """The agent CLIs the run's hosts drive, for the image to carry; a usage error for a host whose API the
    container cannot reach (its one way out is the Messages API proxy, which holds the Anthropic key only)."""
    from runner.hosts import agent_install

    names = [name.strip() for name in str(option or configured).split(",") if name.strip()]
    for name in names:
        found = HOST_TRAITS.get(name)
        if found is not None and found.api != "anthropic-messages":
            fail_usage(f"--container: the {name} host reaches its model through the {found.api} API, but the "
                       "container's only way out is the Messages API proxy, which holds the Anthropic key alone; run "
                       f"the {name} host without --container (its CLI reaches the API through a key proxy of its own)")
    pinned = agent_install.pinned()
    return tuple(sorted(name for name in names if name in pinned))


def run_in_container(library_path: Path, config: Path | None, out: Path | None, resume_dir: Path | None,
                     base_image: str | None, settings_commit: str | None = None) -> None:
    import docker

    from runner.container import launch as container_mod

    loaded = context.load(library_path, config, settings_commit)
    root = loaded.root
    agent_clis = container_agents(click.get_current_context().params.get("host"), loaded.settings.run.host)
    repo_library = "/repo/" + (library_path.resolve().relative_to(root).as_posix() if
                               library_path.resolve() != root else "")
    target = resume_dir or out or Path("runs") / datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    drop = {"library_path", "config", "out", "resume_dir", "container", "base_image", "settings_commit",
            "quarantine_file", "cache", "previous"}
    params = click.get_current_context().params
    cache = cache_folder(params, loaded, root)
    if params.get("untrusted_settings"):  # refused here, before an image is built; the run inside checks again
        given = params.get("max_usd")
        context.refuse_untrusted_settings(loaded, given if isinstance(given, float) else
                                          None if resume_dir else trust.RUNNER_CAP_USD)
    # The container has no Docker: a sandboxed validator runs from here, in its own container, before the run's
    # container (the one the API reaches) starts; in there it is not run again.
    drop.add("validator_sandbox")
    validated_here = params.get("validator_sandbox") == "container" and not params.get("no_library_validator")
    if validated_here:
        found = context.validator_findings(loaded, None, "container")
        context.stop_on_floor(floor_mod.gate(found, loaded.library), "nothing was run")
    extra: list[str] = []
    if not resume_dir and params.get("tier") in ("pr", "cadence") and not params.get("selection_file"):
        # git runs here, on the host: the image has no git and the mount is read-only. The container gets
        # the selection as a file in its output folder.
        selection = context.select(loaded.library, loaded.settings, params["tier"], base=params.get("base"),
                                   head=params.get("head"), period=params.get("period"),
                                   skills=params.get("skills") or (), cases=params.get("cases") or (),
                                   neighbours=bool(params.get("neighbours")), previous=params.get("previous"),
                                   routing=bool(params.get("routing")))
        target.mkdir(parents=True, exist_ok=True)
        (target / "selection.json").write_text(selection.model_dump_json(indent=2), encoding="utf-8")
        extra = ["--selection", "/out/selection.json"]
        drop |= {"base", "head", "period", "skills", "cases", "neighbours"}
    args = ["run", "--library", repo_library.rstrip("/") or "/repo", "--out" if not resume_dir else "--resume",
            "/out", *_forwarded_args(drop), *extra]
    if validated_here:
        args.append("--no-library-validator")
    if cache is not None:
        args += ["--cache", container_mod.CACHE_MOUNT]
    quarantine = params.get("quarantine_file") or loaded.quarantine_file
    if isinstance(quarantine, Path) and not resume_dir:
        # The list --quarantine names, or the commit's (a pull request cannot quarantine the cases it breaks): in as a
        # file of the run folder, like the commit's settings below.
        target.mkdir(parents=True, exist_ok=True)
        try:
            (target / COMMITTED_QUARANTINE).write_bytes(bounded.read_bytes(quarantine, bounded.OPTION_FILE_MAX_BYTES))
        except OSError as exc:
            fail_usage(f"--quarantine {quarantine}: cannot read the quarantine list: {exc}")
        args += ["--quarantine", f"/out/{COMMITTED_QUARANTINE}"]
    if settings_commit is not None:
        # The container has no git and sees the working tree only: the commit's settings go in as a file of the run
        # folder (kept with it: the settings the run used), read before any session starts.
        target.mkdir(parents=True, exist_ok=True)
        held = loaded.committed
        text = held.path.read_bytes() if held is not None and held.path is not None else \
            f"# {loaded.settings_shown} does not exist in that commit: the defaults\n".encode()
        (target / COMMITTED_SETTINGS).write_bytes(text)
        args += ["--config", f"/out/{COMMITTED_SETTINGS}"]
    elif config:
        try:
            args += ["--config", "/repo/" + config.resolve().relative_to(root).as_posix()]
        except ValueError:
            fail_usage("with --container, --config must be inside the repository (it is mounted at /repo)")
    try:
        client = docker.from_env()
        client.ping()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the daemon is the same usage error
        fail_usage(f"--container needs a Docker daemon: {exc}")
    # The image is built from skill-evals' own source (the action's checkout, or this editable install).
    from runner.container.sandbox import source_root

    source = source_root()
    # The time limit: a planning allowance, then the bound of the plan the container writes (container.json and
    # stderr say which and why).
    deadline = container_mod.PlanDeadline.for_run(loaded.settings, target / "plan.json", resumed=bool(resume_dir))

    told: list[container_mod.Deadline] = []

    def deadline_set(found: container_mod.Deadline) -> None:
        told.append(found)
        click.echo(f"skill-evals: container deadline {found.seconds:.0f} s ({found.basis})", err=True)

    # A ContainerError (the image cannot be built or started, ...) is a usage error the command group prints.
    image = container_mod.given_image(client, os.environ) or container_mod.ensure_image(
        client, source, base_image or "python:3.12-slim", context.CONTAINER_TAG, agent_clis=agent_clis)
    outcome = container_mod.run_in_container(
        client, image, root, target, args, container_mod.container_env(os.environ), deadline=deadline,
        on_deadline=deadline_set, cache=cache, cache_writable=not params.get("cache_read_only"))
    # The run inside says /out and /repo: the user reads the folders of this machine.
    click.echo(container_mod.host_paths(outcome.stdout, target, root), nl=False)
    click.echo(container_mod.host_paths(outcome.stderr, target, root), nl=False, err=True)
    if outcome.deadline is not None and not told:  # the run ended before the plan was first looked for
        deadline_set(outcome.deadline)
    if outcome.timed_out and outcome.deadline is not None:
        click.echo(f"skill-evals: the container was stopped at its deadline, {outcome.deadline.seconds:.0f} s "
                   f"({outcome.deadline.basis}); the run folder can be continued with --resume", err=True)
    proxy = outcome.api_proxy or {}
    if proxy.get("refused_total"):
        click.echo(f"skill-evals: the API proxy refused {proxy['refused_total']} request(s) from the container, e.g. "
                   f"{', '.join(proxy['refused'][:5])} (only the Messages API endpoints skill-evals uses are "
                   "forwarded; container.json lists them)", err=True)
    sys.exit(outcome.exit_code)
