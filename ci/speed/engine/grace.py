"""How long a worker asked just before the --max-minutes deadline still gets to answer: $MXFP4_SPEED_GRACE_S (every
read from a warm worker is bounded by what is left of --max-minutes, never by less). Why: docs/SPEED_GATE.md.
"""

from __future__ import annotations

import math
import os

from ci.common.options import OptionsError

GRACE_ENV = "MXFP4_SPEED_GRACE_S"
DEFAULT_GRACE_S = 30.0


def grace_value() -> float:
    """$MXFP4_SPEED_GRACE_S in seconds (default 30): a finite number > 0, else an OptionsError naming it."""
    text = os.environ.get(GRACE_ENV, "").strip()
    if not text:
        return DEFAULT_GRACE_S
    try:
        seconds = float(text)
    except ValueError:
        raise OptionsError(f"${GRACE_ENV}={text!r}: expected a number of seconds") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise OptionsError(f"${GRACE_ENV}={text!r}: must be a finite number of seconds > 0")
    return seconds
