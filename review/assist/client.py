"""The Anthropic client as itsmreview uses it: a key from ITSMREVIEW_ANTHROPIC_API_KEY or the
SDK's own ANTHROPIC_API_KEY, the endpoint from the SDK's ANTHROPIC_BASE_URL, retries and
timeouts from the settings. Nothing here sends a request; the services do, when a lead asks."""

import os
from functools import lru_cache
from pathlib import Path

from itsmreview.errors import ItsmReviewError
from itsmreview.files import parse_yaml
from itsmreview.settings import Settings, get_settings

PRICES = Path(__file__).parent / "prices.yaml"

HOW_TO_ENABLE = (
    "Model reviews and gap hints need an Anthropic API key: set ANTHROPIC_API_KEY (or "
    "ITSMREVIEW_ANTHROPIC_API_KEY) in the environment of `itsmreview serve` or of the command, "
    "and ANTHROPIC_BASE_URL for a compatible endpoint other than api.anthropic.com. Nothing is "
    "sent to the API until a lead starts a review or asks for hints."
)


class NotConfigured(ItsmReviewError):
    """A model feature was asked for without an API key."""


def api_key(settings: Settings | None = None) -> str | None:
    settings = settings or get_settings()
    return settings.anthropic_api_key or os.environ.get("ANTHROPIC_API_KEY") or None


def configured(settings: Settings | None = None) -> bool:
    return api_key(settings) is not None


def endpoint() -> str:
    return os.environ.get("ANTHROPIC_BASE_URL") or "https://api.anthropic.com"


# Tests and benchmarks put an httpx transport here (the real SDK then talks to it).
http_client_factory = None


def make_client(settings: Settings | None = None):
    """The SDK's client. Raises NotConfigured (saying how to enable it) without a key."""
    import anthropic

    settings = settings or get_settings()
    key = api_key(settings)
    if key is None:
        raise NotConfigured(HOW_TO_ENABLE)
    return anthropic.Anthropic(
        api_key=key,
        max_retries=settings.model_max_retries,
        timeout=settings.model_timeout_s,
        http_client=http_client_factory() if http_client_factory else None,
    )


@lru_cache
def _listed_prices() -> dict[str, tuple[float, float]]:
    data = parse_yaml(PRICES.read_text(encoding="utf-8"), PRICES)
    return {str(name): (float(p[0]), float(p[1])) for name, p in data.items()}


def price_of(model: str, settings: Settings | None = None) -> tuple[float, float] | None:
    """(input, output) US dollars per million tokens: the listed price of the model (its
    longest listed prefix, so dated names match), else the configured one, else None.

    >>> price_of("claude-sonnet-4-5-20250929")
    (3.0, 15.0)
    """
    listed = _listed_prices()
    for name in sorted(listed, key=len, reverse=True):
        if model == name or model.startswith(name + "-"):
            return listed[name]
    settings = settings or get_settings()
    if settings.model_price_input is not None and settings.model_price_output is not None:
        return settings.model_price_input, settings.model_price_output
    return None


def cost_of(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """US dollars of one request's tokens; None for a model without a price.

    >>> cost_of("claude-haiku-4-5", 1_000_000, 100_000)
    1.5
    """
    price = price_of(model)
    if price is None:
        return None
    return round((input_tokens * price[0] + output_tokens * price[1]) / 1_000_000, 6)
