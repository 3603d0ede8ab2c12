"""The one root of every error a user of the ci tools can cause.

A front (``ci/common/command.py``) catches it, and the two roots below ci/ (harness.errors.MeasurementError,
kernels.errors.KernelError), only: it prints the message as one line, ``python -m ci.X: error: <message>``, and
exits 2. Anything else is a defect in the tools: an "internal error" line, exit 2 as well, so a crash is never
read as "passed" (0), "failed gate" (1) or "inconclusive" (3).
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
