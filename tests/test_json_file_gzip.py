"""ci.common.json_file reads a record kept compressed (docs/data's GPU records, name ending in .gz) as the same value,
counts its limit on the decompressed text, and names a damaged file."""

from __future__ import annotations

import gzip
import json

import pytest

from ci.common.json_file import JsonFileError, read_json
from ci.speed.decide.verdict import RecordError, load_record


def test_a_gzip_file_reads_as_its_plain_twin(tmp_path):
    value = {"schema": "x", "rounds": [{"wall_s": 37.5, "d": [1e-4, -2.5e-3]}], "name": "triton_dot_scaled[m128]"}
    text = json.dumps(value)
    (tmp_path / "r.json").write_text(text)
    (tmp_path / "r.json.gz").write_bytes(gzip.compress(text.encode()))
    assert read_json(tmp_path / "r.json.gz") == read_json(tmp_path / "r.json") == value


def test_the_limit_counts_the_decompressed_text(tmp_path):
    # 1 MiB of spaces compresses to ~1 KiB: a decompression bomb must meet the same cap as a plain file.
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(b"[" + b" " * (1 << 20) + b"]"))
    with pytest.raises(JsonFileError, match=r"bomb\.json\.gz: over 0 MiB"):
        read_json(path, limit=1 << 19)
    assert read_json(path, limit=2 << 20) == []


@pytest.mark.parametrize(
    "content, said",
    [(b"not gzip at all", "cannot read"), (gzip.compress(b'{"a": 1}')[:-6], "a cut or damaged gzip")],
    ids=["not gzip", "cut short"],
)
def test_a_damaged_gzip_file_is_an_error_naming_it(tmp_path, content, said):
    path = tmp_path / "damaged.json.gz"
    path.write_bytes(content)
    with pytest.raises(JsonFileError, match=f"damaged.json.gz: {said}"):
        read_json(path)


def test_a_gate_record_replays_from_its_gzip_file(tmp_path):
    record = {"schema": "mxfp4-speed-gate/1", "rounds": [], "benchmarks": [], "plan": {}, "exclusion": {}}
    record["thresholds"] = {}
    path = tmp_path / "aa.json.gz"
    path.write_bytes(gzip.compress(json.dumps(record).encode()))
    assert load_record(path) == record
    path.write_bytes(gzip.compress(json.dumps({**record, "schema": "other"}).encode()))
    with pytest.raises(RecordError, match="not a mxfp4-speed-gate/1 record"):
        load_record(path)
