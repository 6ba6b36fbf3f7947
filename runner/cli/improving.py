"""`improve SKILL`: propose a better description for one skill from its train cases, check it against the
neighbours and on held-out test cases, and write improve.json and a diff of SKILL.md (runner.improve)."""

from __future__ import annotations

import os
import secrets
import sys
from datetime import datetime, timezone
from pathlib import Path

import click
from rich.console import Console

from runner.cli import context, options
from runner.cli.app import EXIT_OK, fail_usage
from runner.cli.environment import PLAN_ENVIRONMENT
from runner.corpus import trust

HOLDOUT = options.FiniteFloat(min=0, max=1, min_open=True, max_open=True)


@click.command("improve", short_help="Propose a better description for a skill, tested on held-out cases.",
               epilog=PLAN_ENVIRONMENT)
@click.argument("skill")
@options.library_option
@options.config_option
@options.settings_commit_option
@options.host_option("Default from [run] host (claude-code).")
@options.model_option("The model every session runs on (default [run] model).")
@click.option("--proposer-model", default=None, help="The model that proposes descriptions (default [judge] model).")
@options.max_usd_option("Hard cap on everything the loop spends: sessions and proposer calls (default [run] max_usd).")
@click.option("--rounds", type=click.IntRange(1, 20), default=3, show_default=True, help="Proposal rounds at most.")
@click.option("--candidates", type=click.IntRange(1, 10), default=3, show_default=True,
              help="Descriptions asked for per round.")
@click.option("--finalists", type=click.IntRange(1, 10), default=2, show_default=True,
              help="Per round, the candidates better on train (best first) that may get the neighbour check; "
                   "each check is one run of the neighbours' cases.")
@click.option("--repeats", type=options.REPEATS, default=None, help="N per case (default [tiers.full] repeats).")
@click.option("--quorum", type=options.AT_LEAST_ONE, default=None, help="k (> N/2); default the majority of N.")
@click.option("--seed", type=click.IntRange(min=0), default=None,
              help="The split's seed (default: a random one, recorded in improve.json).")
@click.option("--holdout", type=HOLDOUT, default=0.4, show_default=True,
              help="Share of each kind's cases held out for the test split.")
@options.out_folder_option("Where improve.json, SKILL.md.diff and the run folders go (default improve/<skill>-<time>).")
@options.floor_options
@options.untrusted_option
def improve_command(skill: str, library_path: Path, config: Path | None, host: str | None, model: str | None,
                    proposer_model: str | None, max_usd: float | None, rounds: int, candidates: int, finalists: int,
                    repeats: int | None, quorum: int | None, seed: int | None, holdout: float, out: Path | None,
                    no_library_validator: bool = False, strict: bool = False, validator_sandbox: str = "none",
                    untrusted_settings: bool = False, settings_commit: str | None = None) -> None:
    """Improve SKILL's description on train cases; report it on held-out test cases. Never edits the library."""
    from runner.hosts import prices as prices_mod
    from runner.improve import loop
    from runner.improve.propose import Proposer
    from runner.improve.render import print_improve
    from runner.pipeline import run as runs_mod

    loaded = context.load(library_path, config, settings_commit)
    if untrusted_settings:  # the action runs improve beside the key, on the repository's settings
        # The action gives --max-usd as what its run left of a cap the settings already lowered, so a [run]
        # max_usd above it is no attempt to raise it: it is not refused, and a lower one still lowers it. Without
        # --max-usd, as `run`.
        if max_usd is None:
            max_usd = context.untrusted_cap(loaded, None)
        else:
            context.refuse_untrusted_settings(loaded, None)
            max_usd = trust.effective_cap(loaded.settings, max_usd)
    if skill not in loaded.library.skills:
        fail_usage(f"{skill!r} is not a skill of this library")
    if loaded.library.skills[skill].manual_only:
        fail_usage(f"{skill} is manual-only (disable-model-invocation): no description makes the host invoke it")
    try:
        settings, tier = runs_mod.apply_options(loaded.settings, runs_mod.Options(
            host=host, model=model, max_usd=max_usd, repeats=repeats, quorum=quorum, no_judge=True))
    except ValueError as exc:
        fail_usage(str(exc))
    gate = context.floor_gate(loaded, run_library_validator=not no_library_validator, strict=strict,
                              validator_sandbox=validator_sandbox)
    context.stop_on_floor(gate, "nothing was run")
    if skill in gate.skills:
        context.floor_failed("nothing was run", f"{skill} is held back by its floor errors")
    out = out or Path("improve") / f"{skill}-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%SZ')}"
    if (out / loop.IMPROVE_JSON).exists():
        fail_usage(f"{out} already holds an {loop.IMPROVE_JSON}; give --out a new folder")
    credentials = context.credentials()
    bounds = loop.Bounds(host=settings.run.host, model=settings.run.model,
                         proposer_model=proposer_model or settings.judge.model, repeats=tier.repeats,
                         quorum=tier.quorum, max_usd=settings.run.max_usd, rounds=rounds, candidates=candidates,
                         seed=seed if seed is not None else secrets.randbelow(2**31), holdout=holdout,
                         finalists=finalists)
    inputs = loop.Inputs(library=loaded.library, library_path=library_path, settings=settings, skill=skill,
                         credentials=credentials, bounds=bounds, out=out)
    prices = prices_mod.load(settings)
    for what, name in (("model", bounds.model), ("proposer model", bounds.proposer_model)):
        if credentials.api_key and prices.price(name) is None:
            fail_usage(f"the {what} {name!r} has no price in the price table, so the cap could not limit it")
    proposer = Proposer(bounds.proposer_model, credentials.api_key or "", credentials.base_url, prices)
    console = Console(soft_wrap=True, highlight=False)
    unrun = "kill-switch" if runs_mod.kill_switch(settings, os.environ) else (
        "no-credentials" if not credentials.api_key else None)
    if unrun is not None:
        record = loop.plan_only(inputs, unrun, proposer)
        if unrun == "no-credentials":
            console.print(runs_mod.HOW_TO_GET_RESULTS, markup=False)
    else:
        record = loop.improve(inputs, proposer)
    print_improve(record, console)
    console.print(f"Wrote {out / loop.IMPROVE_JSON}" + (f" and {out / loop.DIFF}" if record.diff else ""),
                  markup=False)
    sys.exit(EXIT_OK)
