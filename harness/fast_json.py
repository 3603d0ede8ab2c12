"""JSON read through orjson where it is installed and accepts the text, else through the standard library: the same
values either way (tests/test_fast_json.py; docs/PERF_NOTES.md, "The full publish: summarizing 200,000 files").

Why: a full history publish decodes every results file and its sidecar (200,000 of each at 50,000 commits x 4
machines); orjson decodes a sidecar ~3x faster. Imports nothing from kernels/ or ci/.
"""

from __future__ import annotations

import importlib
import json
from types import ModuleType
from typing import Any


def _optional(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:  # a GPU runner's own environment, or a machine without the pinned CPU stack
        return None


orjson = _optional("orjson")


# A run of 19 or more digits not after a ".": an integer token that may pass 64 bits, which orjson would read as a
# float where the standard library gives an int. Found in C (a translation, then a search: ~1/3 of orjson's time).
_DIGITS_AND_POINTS = bytes.maketrans(
    b"123456789" + bytes(i for i in range(256) if i not in b"0123456789."), b"0" * 9 + b" " * 245
)
_LONG_INTEGER = b" " + b"0" * 19
# Tokens orjson refuses and the standard library reads (asv writes NaN: every GPU machine's results file has it): a
# text holding one goes to the standard library at once, not through a parse that fails first.
_NON_FINITE = (b"NaN", b"Infinity")


def loads(text: str | bytes) -> Any:
    """``json.loads(text)``: orjson's reading where it gives the same value, else the standard library's (its value or
    its error): where the text holds ``NaN`` or ``Infinity`` (orjson refuses them), where orjson refuses it otherwise
    (lone surrogates, anything invalid) or where it may hold an integer past 64 bits."""
    if orjson is not None:
        data = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
        if _orjson_may_read(data):
            try:
                return orjson.loads(data)
            except orjson.JSONDecodeError:
                pass
    return json.loads(text)


def _orjson_may_read(data: bytes) -> bool:
    """False where orjson would refuse the text (a non-finite number) or read it otherwise (an integer past 64 bits)."""
    return not any(token in data for token in _NON_FINITE) and _LONG_INTEGER not in b" " + data.translate(
        _DIGITS_AND_POINTS
    )
