"""How the main job speaks: progress lines on stderr, and the error that ends it with exit 2."""

from __future__ import annotations

import sys


def log(message: str) -> None:
    print(f"main_job: {message}", file=sys.stderr, flush=True)


class HarnessError(RuntimeError):
    """The job could not do its work (not a benchmark result); exit 2."""
