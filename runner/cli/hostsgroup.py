"""`skill-evals hosts`: the hosts a run can use, and installing the agent CLIs they drive."""

from __future__ import annotations

import click

from runner.cli.app import fail_usage
from runner.core.errors import UsageError
from runner.core.host_traits import HOST_TRAITS


@click.group(short_help="The hosts a run can use; install the agent CLIs they drive.")
def hosts() -> None:
    """The hosts a run can use (`--host`), and the agent CLIs some of them drive."""


@hosts.command("list", short_help="Each host, how it shows an activation, and its CLI.")
def list_hosts() -> None:
    from runner.hosts import agent_install

    pins = agent_install.pinned()
    for name, host in HOST_TRAITS.items():
        cli = pins.get(name)
        where = ""
        if cli is not None:
            try:
                where = f"  {cli.spec}: {agent_install.locate(name)}"
            except UsageError:
                where = f"  {cli.spec}: not installed ({agent_install.install_command([name])})"
        click.echo(f"{name:12} activation {host.activation_grade:10}{where}")


@hosts.command(short_help="Install the pinned agent CLIs from npm.")
@click.argument("names", nargs=-1)
@click.option("--for-hosts", "for_hosts", default=None, metavar="LIST",
              help="Instead of NAMES: the CLIs the hosts of this comma list drive (what `run --host LIST` needs); a "
                   "host that drives none (claude-code, api, first-turn) needs nothing installed.")
def install(names: tuple[str, ...], for_hosts: str | None) -> None:
    """Install the agent CLIs of NAMES (all of them when none is named), each at the version it is pinned to, into
    $SKILL_EVALS_AGENT_CLIS (default ~/.cache/skill-evals/agent-clis). Needs node >= 20 and npm."""
    from runner.hosts import agent_install

    pins = agent_install.pinned()
    if for_hosts is not None:
        wanted = [name.strip() for name in for_hosts.split(",") if name.strip()]
        strangers = [name for name in wanted if name not in HOST_TRAITS]
        if names or strangers:
            fail_usage("give NAMES or --for-hosts, not both" if names else
                       f"--for-hosts: no host is named {', '.join(strangers)}; the hosts are {', '.join(HOST_TRAITS)}")
        names = tuple(name for name in wanted if name in pins)
        if not names:
            click.echo("no agent CLI to install: these hosts drive none")
            return
    unknown = [name for name in names if name not in pins]
    if unknown:
        fail_usage(f"no agent CLI is pinned for {', '.join(unknown)}; the agent hosts are {', '.join(sorted(pins))}")
    try:
        for path in agent_install.install(list(names)):
            click.echo(str(path))
    except UsageError as exc:
        fail_usage(str(exc))
