"""SQLite against DuckDB for the history store's two access patterns: a benchmark, not a test (issue 48, deliver 1).

    pip install --target /tmp/duck duckdb==2.0.1      # not a dependency of the project: only this measurement uses it
    PYTHONPATH=.:/tmp/duck python docs/data/store_engines.py --commits 10000 --out docs/data/store_engines.json

Rows shaped as ``points_v4`` (ci/history/asv_results/store.py): ``--commits`` commits x 3 machines x 30 GEMM keys,
one file per (commit, machine). Per engine, in a fresh database file:

* ``build``: every file's 30 rows inserted, one transaction per 500 files (as ``Store.update``'s batches);
* ``one file``: one more file's rows inserted and committed, 200 times (the publish after one new commit writes 4);
* ``lines``: each of the 90 lines (machine, key) read in file order through the (machine, key) index (the checks and
  the whole-history pages read every line so);
* ``window``: the newest 200 commits' rows read (the newest page);
* the database file's size.

CPU seconds of this process (time.process_time); the machine is shared.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import time
from pathlib import Path

COLUMNS = (
    "file INTEGER, machine INTEGER, key INTEGER, tflops DOUBLE, median_s DOUBLE, level DOUBLE, error DOUBLE, "
    "iqr DOUBLE, device INTEGER, flags INTEGER, clocks INTEGER, copied VARCHAR"
)


def rows_of(file_id: int, machine: int, rng: random.Random) -> list[tuple]:
    return [
        (
            file_id,
            machine,
            key,
            rng.uniform(100, 900),
            rng.uniform(1e-3, 1e-1),
            rng.gauss(6, 1),
            1e-3,
            0.01,
            1,
            2,
            3,
            None,
        )
        for key in range(30)
    ]


def measure(engine: str, commits: int, folder: Path) -> dict:
    path = folder / f"points.{engine}"
    for leftover in folder.glob(f"points.{engine}*"):
        leftover.unlink()
    if engine == "sqlite":
        db = sqlite3.connect(path)
    else:
        import duckdb

        db = duckdb.connect(str(path))
    db.execute(f"CREATE TABLE points ({COLUMNS})")
    db.execute("CREATE INDEX points_line ON points (machine, key)")
    db.execute("CREATE INDEX points_file ON points (file)")
    rng = random.Random(0)
    out: dict = {"engine": engine, "commits": commits, "rows": commits * 3 * 30}
    started = time.process_time()
    file_id = 0
    for start in range(0, commits * 3, 500):
        if engine == "duckdb":
            db.execute("BEGIN TRANSACTION")
        for _ in range(start, min(start + 500, commits * 3)):
            db.executemany(
                "INSERT INTO points VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows_of(file_id, file_id % 3, rng)
            )
            file_id += 1
        db.commit() if engine == "sqlite" else db.execute("COMMIT")
    out["build_cpu_s"] = round(time.process_time() - started, 2)
    started = time.process_time()
    for _ in range(200):
        if engine == "duckdb":
            db.execute("BEGIN TRANSACTION")
        db.executemany(
            "INSERT INTO points VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows_of(file_id, file_id % 3, rng)
        )
        file_id += 1
        db.commit() if engine == "sqlite" else db.execute("COMMIT")
    out["one_file_ms"] = round((time.process_time() - started) / 200 * 1000, 2)
    started = time.process_time()
    read = 0
    for machine in range(3):
        for key in range(30):
            read += len(
                db.execute(
                    "SELECT file, tflops, level, error FROM points WHERE machine = ? AND key = ? ORDER BY file",
                    (machine, key),
                ).fetchall()
            )
    out["lines_cpu_s"] = round(time.process_time() - started, 2)
    out["lines_rows"] = read
    started = time.process_time()
    window = db.execute("SELECT * FROM points WHERE file >= ? ORDER BY file", (file_id - 600,)).fetchall()
    out["window_ms"] = round((time.process_time() - started) * 1000, 1)
    out["window_rows"] = len(window)
    db.close()
    out["database_mb"] = round(sum(p.stat().st_size for p in folder.glob(f"points.{engine}*")) / 1e6, 1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commits", type=int, default=10000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/store-engines"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    import duckdb

    rows = [measure(engine, args.commits, args.work) for engine in ("sqlite", "duckdb")]
    document = {
        "what": "docs/data/store_engines.py",
        "sqlite": sqlite3.sqlite_version,
        "duckdb": duckdb.__version__,
        "load_average": [round(v, 2) for v in os.getloadavg()],
        "rows": rows,
    }
    print(json.dumps(document, indent=1))
    if args.out:
        args.out.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
