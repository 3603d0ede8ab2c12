"""How long a worker asked just before the --max-minutes deadline still gets to answer: $MXFP4_SPEED_GRACE_S.

Every read from a warm worker is bounded by what is left of --max-minutes, but never
by less than this grace (ci.speed.modes.shared.open_measurer): a start, a survey or a timing
asked at the last moment is not cut off before it could answer, and a hanging kernel
holds the runner at most this long after the deadline. An environment variable, not an
option: the CI workflow has no reason to change it; a test of the hanging kernel does.
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
