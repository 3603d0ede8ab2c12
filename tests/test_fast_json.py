"""harness/fast_json.py: orjson's reading where it takes the text, the standard library's otherwise -- the same values
and the same errors as ``json.loads``."""

from __future__ import annotations

import json

import pytest

from harness import fast_json

TEXTS = [
    '{"a": 1, "a": 2, "b": [1.5, -0.0, -0, 1e5, 5e-324, 1.7976931348623157e308, 0.1]}',  # a repeated key: the last
    "[NaN, Infinity, -Infinity, 1e400]",  # asv writes NaN: orjson refuses it, the standard library reads it
    "[18446744073709551616, -9223372036854775809]",  # integers past 64 bits: orjson reads them as floats
    '{"x": 18446744073709551616}',
    "18446744073709551616",
    "[0.00012473987197120532123, 1234567890123456789.5, 12345678901234567890e0]",  # long runs that are floats
    '"\\ud800"',  # a lone surrogate
    '{"k": "caf\\u00e9 \\n", "n": null, "t": true}',
]


@pytest.mark.parametrize("text", TEXTS)
def test_the_values_are_the_standard_librarys(text):
    for given in (text, text.encode()):
        assert repr(fast_json.loads(given)) == repr(json.loads(given))


def test_without_orjson_it_is_the_standard_library(monkeypatch):
    monkeypatch.setattr(fast_json, "orjson", None)
    for text in TEXTS:
        assert repr(fast_json.loads(text)) == repr(json.loads(text))


@pytest.mark.parametrize("text", ['{"a": ', "[1, 2", "", "nope"])
def test_an_invalid_text_raises_the_standard_librarys_error(text):
    with pytest.raises(json.JSONDecodeError) as ours:
        fast_json.loads(text)
    with pytest.raises(json.JSONDecodeError) as theirs:
        json.loads(text)
    assert str(ours.value) == str(theirs.value)


def test_a_text_with_nan_or_infinity_is_not_parsed_by_orjson_first(monkeypatch):
    """orjson refuses them: asv's NaN in every GPU results file cost a failed orjson parse before the standard one."""

    class Refusing:
        JSONDecodeError = json.JSONDecodeError

        @staticmethod
        def loads(data):
            raise AssertionError(f"orjson was asked to parse {data!r}")

    monkeypatch.setattr(fast_json, "orjson", Refusing)
    for text in ("[NaN, 1]", '{"x": Infinity}', "[-Infinity]"):
        assert repr(fast_json.loads(text)) == repr(json.loads(text))
