"""The one root of every error a user of the ci tools can cause (harness.errors and kernels.errors have their own).

A front (``ci/common/command.py``) prints any of the three roots as one line, ``python -m ci.X: error: <message>``,
exit 2; anything else is a defect: an "internal error" line, exit 2 as well, never "passed" (0), "failed gate" (1)
or "inconclusive" (3).
"""

from __future__ import annotations


class HarnessError(Exception):
    """Bad input, a missing or unreadable file, a tool that failed: the message says which and what to do."""


class UsageError(HarnessError):
    """An argument or an option value is wrong (the front also prints its usage line)."""


class InputError(HarnessError):
    """A file or record the tool reads is missing, unreadable or not what it should be."""


class WriteError(HarnessError):
    """A result could not be written (a full disk, no permission); the message names what was kept."""
