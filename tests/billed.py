"""What the fake Messages API billed (runner/testing/fake_anthropic.py, Billing), in USD at the runner's price table."""

from __future__ import annotations

from runner.core.observation import Usage
from runner.corpus.settings import Settings
from runner.hosts.prices import PriceTable
from runner.hosts.prices import load as load_prices
from runner.testing.fake_anthropic import Billed, FakeAnthropic


def usd(billed: list[Billed], prices: PriceTable | None = None) -> float:
    """The billed requests' cost; a Message Batch's at the batch discount."""
    from runner.execute.batch.host import BATCH_DISCOUNT

    table = prices or load_prices(Settings())
    total = 0.0
    for bill in billed:
        cost = table.cost(bill.model, Usage(input_tokens=bill.usage.input_tokens, output_tokens=bill.usage.output_tokens,
                                            cache_creation_input_tokens=bill.usage.cache_creation_input_tokens,
                                            cache_read_input_tokens=bill.usage.cache_read_input_tokens))
        assert cost is not None, f"the fake billed a model the price table does not know: {bill.model}"
        total += cost * (BATCH_DISCOUNT if bill.batch else 1.0)
    return total


def billed_usd(fake: FakeAnthropic, prices: PriceTable | None = None, match: str | None = None) -> float:
    """Everything the fake billed (or only the requests of the script whose `match` this is)."""
    return usd(fake.billed if match is None else fake.billed_for(match), prices)
