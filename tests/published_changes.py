"""Change points as the site build publishes them (changes.json), built by the regression-issue and site tests."""

from __future__ import annotations

import hashlib

MACHINE = "h200-a"


def sha(i: int) -> str:
    """The commit at position ``i`` of a synthetic history: a stable 40-hex id."""
    return hashlib.sha1(f"commit {i}".encode()).hexdigest()


def cp(
    benchmark: str,
    index: int,
    change: float,
    *,
    machine: str = MACHINE,
    direction: str = "regression",
    settled: int = 10,
    at: int | None = None,
    suspected: tuple[int, int] | None = None,
) -> dict:
    """A change point as the site build publishes it; ``at`` its commit position (default: the series index);
    ``suspected``: the (x, y] commit-order range its location's confidence set allows (default: not said)."""
    at = index if at is None else at
    return {
        **({"suspected": list(suspected)} if suspected else {}),
        "machine": machine,
        "benchmark": benchmark,
        "last_before": sha(at - 1),
        "first_after": sha(at),
        "orders": [at - 1, at],
        "recent": True,
        "change": {
            "index": index,
            "direction": direction,
            "relative_change": change,
            "interval": [change - 0.004, change + 0.004],
            "confidence": 0.95,
            "p_value": 1e-12,
            "level": 2.6e-6,
            "before": [0, index],
            "after": [index, index + settled],
        },
    }
