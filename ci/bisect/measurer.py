"""The real measurer and fingerprint key of ci.bisect.engine: the speed gate (its JSON record, never its log; exit 0, 1
and 3 are verdicts, anything else a :class:`MeasureError`) and ci.common.code_fingerprint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ci.bisect.engine import Measurement
from ci.common import gitutil
from ci.common.code_fingerprint import fingerprint_tree
from ci.common.errors import HarnessError


class MeasureError(HarnessError, RuntimeError):
    """The speed gate could not measure (its exit 2, or no readable record)."""


def parse_bench(text: str) -> tuple[str, str, str]:
    """``kernel[config]/shape`` (the gate's benchmark id) -> (kernel, config, shape)."""
    kernel, sep, rest = text.partition("[")
    config, sep2, shape = rest.partition("]/")
    if not (kernel and sep and config and sep2 and shape):
        raise ValueError(f"{text!r}: expected kernel[config]/shape, the speed gate's benchmark id")
    return kernel, config, shape


def measurement_from_record(record: dict[str, Any], base: str, head: str) -> Measurement:
    benchmarks = record.get("benchmarks") or []
    if len(benchmarks) != 1:
        raise MeasureError(
            f"the gate's record has {len(benchmarks)} benchmarks, expected 1 (verdict {record.get('verdict')!r})"
        )
    bench = benchmarks[0]
    estimate = (bench.get("decision") or {}).get("estimate") or {}
    verdict = bench.get("verdict")
    if verdict is None:
        raise MeasureError(f"{head[:12]}: the gate gave no verdict ({bench.get('status')}: {bench.get('note')})")
    return Measurement(
        base, head, verdict, estimate.get("point"), estimate.get("low"), estimate.get("high"), bench.get("threshold")
    )


@dataclass(frozen=True)
class SpeedGateMeasurer:
    kernel: str
    config: str
    shape: str
    repo: Path
    gate_args: Sequence[str] = ()  # passed through: --device, --thresholds, --plan max_rounds=30, ...
    log: Callable[[str], None] = lambda line: None

    def __call__(self, base: str, head: str) -> Measurement:
        with tempfile.TemporaryDirectory(prefix="bisect-") as scratch:
            out = Path(scratch) / "verdict.json"
            command = [
                sys.executable,
                "-m",
                "ci.speed",
                "--base",
                base,
                "--head",
                head,
                "--kernel",
                self.kernel,
                "--config",
                self.config,
                "--shape",
                self.shape,
                "--json",
                str(out),
                # A midpoint may have the good end's code again (a revert): measured, never skipped unseen.
                "--measure-identical",
                *self.gate_args,
            ]
            self.log("running " + " ".join(command))
            done = subprocess.run(command, cwd=self.repo, env=dict(os.environ), stdout=sys.stderr)
            if done.returncode not in (0, 1, 3):  # 3: inconclusive (the zone rule), a verdict the engine stops on
                raise MeasureError(f"python -m ci.speed exited {done.returncode} for {head[:12]} vs {base[:12]}")
            try:
                record = json.loads(out.read_text())
            except (OSError, ValueError) as exc:
                raise MeasureError(f"no readable verdict record from the speed gate: {exc}") from None
        return measurement_from_record(record, base, head)


@dataclass
class FingerprintKey:
    """A commit's speed fingerprint of (kernel, config) on ``archs``, a comparable tuple; None if a part is unknown."""

    repo: Path
    kernel: str
    config: str
    archs: Sequence[str]
    log: Callable[[str], None] = lambda line: None

    def __call__(self, commit: str) -> Hashable | None:
        repo = gitutil.open_repo(self.repo)
        with gitutil.checkout(repo, commit) as tree:
            prints = fingerprint_tree(tree, self.archs, kernels=[self.kernel], log=self.log)
        parts = []
        for arch in self.archs:
            found = prints.fingerprints.get((self.kernel, self.config, arch))
            if found is None or not all(p.known for p in found.parts().values()):
                return None
            parts.append(tuple(p.digest for p in found.parts().values()))
        return tuple(parts)
