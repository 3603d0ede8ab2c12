"""What a run cost the GPU runner: seconds starting processes, seconds overlapped, seconds measuring.

Read from the warm workers' round records (ci.speed.engine.warm_engine.WarmEngine); the gate's
report prints it ("GPU runner: ...", ci.speed.report.write).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def cost_summary(rounds: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Seconds spent starting processes vs measuring, over round records.

    ``startup_s`` and ``measure_s`` sum every process's own seconds that held the runner (two
    workers starting side by side count twice: each holds the device); ``overlapped_startup_s``
    is start-up done by spares while other workers measured (no runner time);
    ``device_wall_s`` is each device's wall time.
    """
    startup = overlapped = measure = 0.0
    processes: set[tuple[Any, ...]] = set()
    device_wall: dict[str, float] = {}
    for rnd in rounds:
        for proc in rnd["processes"]:
            startup += proc.get("startup_s") or 0.0
            measure += proc.get("measure_s") or 0.0
            for worker in proc.get("workers") or [{"pid": proc.get("pid"), "round": rnd["index"]}]:
                processes.add((worker.get("pid"), worker.get("round")))
                overlapped += worker.get("overlapped_startup_s") or 0.0
        for dev in rnd.get("devices") or [{"device": "default", "wall_s": rnd.get("wall_s") or 0.0}]:
            key = str(dev["device"])
            device_wall[key] = round(device_wall.get(key, 0.0) + (dev.get("wall_s") or 0.0), 3)
    return {"startup_s": round(startup, 3), "overlapped_startup_s": round(overlapped, 3),
            "measure_s": round(measure, 3),
            "processes_started": len(processes), "device_wall_s": device_wall}
