"""One main job per checkout, and nothing left running after it: a job file, a tag on every process, a reaper.

asv starts its benchmark processes, and with ``--launch-method forkserver`` a server
that forks them, each in a process group of its own (so that asv can kill one on a
timeout). A SIGKILL to the main job's process group therefore leaves them running,
holding the GPU and asv's temporary files. So:

* every process of a run inherits ``MXFP4_MAIN_JOB=<checkout>::<job id>``
  (asv passes its environment on to every benchmark process it starts);
* ``.asv/main_job.json`` names the running job: its pid, the pid's start time
  (so a recycled pid is not mistaken for it), and its temporary directory
  (asv's TMPDIR, forkserver socket included);
* at start, a job whose process is alive is refused (exit 2); one that is dead
  was killed: every process still tagged with this checkout is ended (its
  process group when it leads one), and its temporary directory removed.

Linux only (``/proc``), like the runners.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from asv_bench.records import JOB_ENV
from harness.report import write_json_atomic


class JobConflict(RuntimeError):
    """Another main job is running in this checkout."""


@dataclass(frozen=True)
class Job:
    id: str
    checkout: Path
    tmp_dir: Path
    job_file: Path

    @property
    def tag(self) -> str:
        return f"{self.checkout}::{self.id}"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22); None when gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rpartition(")")[2].split()[19]


def _environ(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode(errors="replace"): v.decode(errors="replace") for k, v in pairs}


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def tagged_processes(checkout: Path, *, except_job: str | None = None) -> list[int]:
    """PIDs of processes tagged with a job of ``checkout`` other than ``except_job``, never this process."""
    prefix = f"{checkout}::"
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        tag = _environ(int(entry.name)).get(JOB_ENV, "")
        if tag.startswith(prefix) and tag[len(prefix):] != except_job:
            found.append(int(entry.name))
    return sorted(found)


def end_processes(pids: list[int], grace_s: float = 3.0) -> list[str]:
    """SIGTERM each (its whole group when it leads one), then SIGKILL what is left; returns what was ended."""
    ended = []
    own_group = os.getpgrp()
    targets = []
    for pid in pids:
        try:
            group = os.getpgid(pid)
        except ProcessLookupError:
            continue
        ended.append(f"{pid} ({_cmdline(pid)[:120]})")
        targets.append((pid, group == pid and group != own_group))
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, leads_group in targets:
            try:
                os.killpg(pid, sig) if leads_group else os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_start_time(pid) and not _is_zombie(pid) for pid, _ in targets):
            time.sleep(0.05)
    return ended


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def start(checkout: Path, log) -> Job:
    """Claim the checkout for a new job: refuse a live one, clean up after a killed one."""
    job_file = checkout / ".asv" / "main_job.json"
    previous = _read(job_file)
    if previous and _start_time(previous["pid"]) == previous.get("start_time"):
        raise JobConflict(
            f"another main job is running in this checkout: pid {previous['pid']} since {previous.get('started')} "
            f"({job_file}). Wait for it, or stop it (kill -INT {previous['pid']})"
        )
    strays = tagged_processes(checkout)
    if strays:
        for line in end_processes(strays):
            log(f"ended a process left by a killed main job: {line}")
    if previous and previous.get("tmp_dir") and Path(previous["tmp_dir"]).is_dir():
        shutil.rmtree(previous["tmp_dir"], ignore_errors=True)
        log(f"removed the temporary files of killed main job {previous.get('job')}: {previous['tmp_dir']}")
    job = Job(
        id=time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6],
        checkout=checkout,
        tmp_dir=Path(tempfile.mkdtemp(prefix="mxfp4-main-job-")),
        job_file=job_file,
    )
    write_json_atomic(
        job_file,
        {
            "job": job.id,
            "pid": os.getpid(),
            "start_time": _start_time(os.getpid()),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "tmp_dir": str(job.tmp_dir),
        },
    )
    return job


def finish(job: Job) -> list[str]:
    """End what this job left running (after an interrupt), remove its temporary files and its job file."""
    ended = end_processes(tagged_processes(job.checkout, except_job=None))
    shutil.rmtree(job.tmp_dir, ignore_errors=True)
    current = _read(job.job_file)
    if current and current.get("job") == job.id:
        job.job_file.unlink(missing_ok=True)
    return ended


def _read(job_file: Path) -> dict | None:
    try:
        data = json.loads(job_file.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None


class Interrupted(Exception):
    """SIGINT or SIGTERM: stop cleanly."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def raise_on_termination() -> None:
    """SIGTERM (a cancelled CI job) and SIGINT (Ctrl-C) raise Interrupted in the main thread."""

    def handler(signum, frame):
        raise Interrupted(signum)

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)
