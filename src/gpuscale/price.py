"""Prices: USD per GPU-hour, the one rule every answer that costs a run (``plan``, ``scale``,
the serving search) checks a price by."""

from __future__ import annotations

import math

from gpuscale.errors import require

LOWEST_PRICE = 1e-4
"""Cheapest price taken, USD per GPU-hour: a hundredth of a cent, far below any rental (spot
T4s at about $0.1). A subnormal price (1e-310) made tokens per dollar overflow to inf."""
HIGHEST_PRICE = 1e4
"""Dearest price taken: $10,000 per GPU-hour, some thousand times a B200's rental."""


def check_price(price: float | None, field: str = "price") -> None:
    """Refuse a price (``None``: not given) outside :data:`LOWEST_PRICE` to
    :data:`HIGHEST_PRICE` USD per GPU-hour, nan and inf included."""
    require(
        price is None or (math.isfinite(price) and LOWEST_PRICE <= price <= HIGHEST_PRICE),
        f"--price must be a finite number of USD per GPU-hour, got {price}; accepted: "
        f"{LOWEST_PRICE:g} to {HIGHEST_PRICE:g}",
        field=field,
    )
