"""The one root of every error a user of the ci tools can cause (harness.errors and kernels.errors have their own): a
front prints it as one line, exit 2; anything else is an "internal error" (README.md, "Commands with one front")."""

from __future__ import annotations


class HarnessError(Exception):
    """Bad input, a missing or unreadable file, a tool that failed: the message says which and what to do."""


class UsageError(HarnessError):
    """An argument or an option value is wrong (the front also prints its usage line)."""


class InputError(HarnessError):
    """A file or record the tool reads is missing, unreadable or not what it should be."""


class WriteError(HarnessError):
    """A result could not be written (a full disk, no permission); the message names what was kept."""
