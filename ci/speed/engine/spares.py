"""Spare workers: the next generation's processes, spawned and asked to ``preload`` (CPU-only imports) while the
current one measures, promoted at the restart. Why: docs/SPEED_GATE.md, "ci/speed/engine/spares.py".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from ci.speed.engine.worker_handle import WorkerFailed, WorkerProcess


def preload_request(kernels: Sequence[str]) -> dict[str, Any]:
    return {"op": "preload", "kernels": sorted(set(kernels))}


class Spare:
    """One pre-spawned worker, preloading in a background thread until :meth:`promote`."""

    def __init__(self, worker: WorkerProcess, *, kernels: Sequence[str], timeout_s: float):
        self.worker = worker
        self.preloaded_at: float | None = None
        self.failure: str | None = None
        self._thread = threading.Thread(target=self._preload, args=(kernels, timeout_s), daemon=True)
        self._thread.start()

    @property
    def pid(self) -> int:
        return self.worker.pid

    def _preload(self, kernels: Sequence[str], timeout_s: float) -> None:
        try:
            self.worker.request(preload_request(kernels), timeout_s=timeout_s, what="preload (as a spare)")
            self.preloaded_at = time.time()
        except WorkerFailed as exc:
            self.failure = str(exc)

    def promote(self, timeout_s: float) -> tuple[WorkerProcess, float]:
        """The worker, ready for "go", and its seconds of start-up that overlapped the measuring (waiting here for a
        preload still running counts as start-up); a spare that died or failed its preload raises WorkerFailed."""
        go_at = time.time()
        self._thread.join(timeout=timeout_s)
        if self._thread.is_alive():
            self.worker.kill()
            self._thread.join(timeout=5)
            raise WorkerFailed(
                f"{self.worker.name} (pid {self.pid}, a spare) did not preload within {timeout_s:.0f} s (killed)"
            )
        if self.failure is not None:
            self.worker.kill()
            raise WorkerFailed(self.failure)
        if not self.worker.alive:
            self.worker.kill()
            raise WorkerFailed(
                f"{self.worker.name} (pid {self.pid}, a spare) died before it was promoted: {self.worker.stderr_tail()}"
            )
        assert self.preloaded_at is not None
        return self.worker, max(min(self.preloaded_at, go_at) - self.worker.spawned_at, 0.0)

    def kill(self) -> None:
        self.worker.kill()
        self._thread.join(timeout=5)
