"""One main job per checkout, and nothing left running after it: a job file, a tag on every process, a reaper (Linux
only, ``/proc``; how and why: docs/RELIABILITY.md, "One job per checkout")."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from asv_bench.records import JOB_ENV
from ci.common.errors import HarnessError
from ci.common.files import write_json_atomic

LOCKS_ENV = "MXFP4_MAIN_JOB_LOCKS"
DEFAULT_LOCKS = Path("/tmp/mxfp4-main-job-locks")  # host-wide, not $TMPDIR: two clones may set theirs apart


class JobConflict(HarnessError, RuntimeError):
    """Another main job is running in this checkout, or under this machine name on this host."""


@dataclass(frozen=True)
class Job:
    id: str
    checkout: Path
    tmp_dir: Path
    job_file: Path
    locks: list[int] = field(default_factory=list)  # file descriptors holding a flock, released by finish()

    @property
    def tag(self) -> str:
        return f"{self.checkout}::{self.id}"


def _stat(pid: int) -> list[str] | None:
    """/proc/<pid>/stat's fields after the command name (field 3 on); None when the process is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return None


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (field 22); None when gone."""
    stat = _stat(pid)
    return stat[19] if stat else None


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
        if tag.startswith(prefix) and tag[len(prefix) :] != except_job:
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
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig) if leads_group else os.kill(pid, sig)
        deadline = time.monotonic() + grace_s
        # Wait while a target is alive and not a zombie.
        while time.monotonic() < deadline and any((s := _stat(pid)) and s[0] != "Z" for pid, _ in targets):
            time.sleep(0.05)
    return ended


def _holder(lock_path: Path) -> str:
    """Who holds ``lock_path``, from what the holder wrote into it (a moment after taking it)."""
    for _ in range(20):
        try:
            data = json.loads(lock_path.read_text() or "null")
        except (OSError, ValueError):
            data = None
        if isinstance(data, dict) and isinstance(data.get("pid"), int):
            return f"pid {data['pid']} (job {data.get('job')}, in {data.get('checkout')}, since {data.get('started')})"
        time.sleep(0.05)
    return "a job that has not yet said who it is"


def _hold(lock_path: Path, what: str, holder: dict) -> int:
    """An exclusive flock on ``lock_path`` (the file descriptor), or JobConflict naming who has it."""
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o666)  # not inherited by asv's processes (O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        owner = _holder(lock_path)
        pid = re.match(r"pid (\d+)", owner)
        stop = f", or stop it (kill -INT {pid.group(1)})" if pid else ""
        raise JobConflict(
            f"another main job is running {what}: {owner}, holding {lock_path}. Wait for it{stop}"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, json.dumps(holder).encode(), 0)
    return fd


def _holder_info(job_id: str, checkout: Path) -> dict:
    return {
        "pid": os.getpid(),
        "job": job_id,
        "checkout": str(checkout),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def lock_machine(job: Job, machine: str) -> None:
    """Hold the lock of ``machine`` (an asv machine name) on this host for the rest of ``job``; JobConflict if taken."""
    folder = Path(os.environ.get(LOCKS_ENV) or DEFAULT_LOCKS)
    if not folder.is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(OSError):
            folder.chmod(0o1777)  # shared by every user's clones, like /tmp itself
    lock = folder / f"{re.sub(r'[^A-Za-z0-9._-]', '_', machine)}.lock"
    where = f"under the machine name {machine!r} on this host"
    job.locks.append(_hold(lock, where, _holder_info(job.id, job.checkout)))


def start(checkout: Path, log) -> Job:
    """Claim the checkout for a new job: refuse a live one (its lock is held), clean up after a killed one."""
    job_file = checkout / ".asv" / "main_job.json"
    job_id = time.strftime("%Y%m%dT%H%M%S") + "-" + uuid.uuid4().hex[:6]
    lock = _hold(checkout / ".asv" / "main_job.lock", "in this checkout", _holder_info(job_id, checkout))
    try:
        previous = _read(job_file)
        if (
            previous
            and previous.get("job") != job_id
            and _start_time(previous["pid"]) == previous.get("start_time")
            and previous["pid"] != os.getpid()
        ):
            # A job of a version without the lock file, still running.
            raise JobConflict(
                f"another main job is running in this checkout: pid {previous['pid']} since {previous.get('started')} "
                f"({job_file}). Wait for it, or stop it (kill -INT {previous['pid']})"
            )
        # What a killed job left: its tagged processes and its temporary directory.
        for line in end_processes(tagged_processes(checkout)):
            log(f"ended a process left by a killed main job: {line}")
        if previous and previous.get("tmp_dir") and Path(previous["tmp_dir"]).is_dir():
            shutil.rmtree(previous["tmp_dir"], ignore_errors=True)
            log(f"removed the temporary files of killed main job {previous.get('job')}: {previous['tmp_dir']}")
        job = Job(
            id=job_id,
            checkout=checkout,
            tmp_dir=Path(tempfile.mkdtemp(prefix="mxfp4-main-job-")),
            job_file=job_file,
            locks=[lock],
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
    except BaseException:
        os.close(lock)
        raise
    return job


def finish(job: Job) -> list[str]:
    """End what this job left running (after an interrupt), remove its temporary files and its job file."""
    ended = end_processes(tagged_processes(job.checkout, except_job=None))
    shutil.rmtree(job.tmp_dir, ignore_errors=True)
    current = _read(job.job_file)
    if current and current.get("job") == job.id:
        job.job_file.unlink(missing_ok=True)
    while job.locks:
        os.close(job.locks.pop())  # releases the flock; the lock file stays (removing it would race a new job)
    return ended


def _read(job_file: Path) -> dict | None:
    try:
        data = json.loads(job_file.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None
