"""Token prices as data (runner/data/prices.json, dated), with repository overrides."""

from __future__ import annotations

import json
from importlib import resources

from pydantic import BaseModel

from runner.core.observation import Usage
from runner.corpus.settings import Price, Settings

PER_MILLION = 1_000_000


class PriceTable(BaseModel):
    read_on: str
    source: str
    models: dict[str, Price]

    def price(self, model: str) -> Price | None:
        """Exact name first, then the longest known name the model starts with (dated releases)."""
        if model in self.models:
            return self.models[model]
        matches = [name for name in self.models if model.startswith(name)]
        return self.models[max(matches, key=len)] if matches else None

    def cost(self, model: str, usage: Usage) -> float | None:
        price = self.price(model)
        if price is None:
            return None
        cache_write = price.cache_write if price.cache_write is not None else price.input * 1.25
        cache_read = price.cache_read if price.cache_read is not None else price.input * 0.1
        return (usage.input_tokens * price.input + usage.output_tokens * price.output
                + usage.cache_creation_input_tokens * cache_write
                + usage.cache_read_input_tokens * cache_read) / PER_MILLION


def load(settings: Settings) -> PriceTable:
    raw = json.loads(resources.files("runner").joinpath("data", "prices.json").read_text(encoding="utf-8"))
    models = {name: Price.model_validate(value) for name, value in raw["models"].items()}
    models.update(settings.prices)
    source = raw["source"] + (" Overridden in settings: " + ", ".join(sorted(settings.prices)) if settings.prices else "")
    return PriceTable(read_on=raw["read_on"], source=source, models=models)
