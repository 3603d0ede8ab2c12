"""Identical code costs the GPU runner nothing: which commits of a run need measuring at all.

Each commit's GEMM benchmarks are fingerprinted on the CPU (ci.common.code_fingerprint); a commit whose
fingerprints all equal a measured commit's on this machine is not measured, its results are copied
(ci.history.measure.copies). A commit already held is "already measured"; ``--remeasure`` measures anyway.
Fingerprints are stamped into each measurement's record (docs/HISTORY.md, "measure/identical.py").
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from asv_bench import records
from ci.common import code_fingerprint, gitutil
from ci.history.asv_results import folder, store

Fingerprints = dict[str, dict[str, str] | None]  # asv key -> {part: digest}, None when a part is unknown


def commit_fingerprints(
    repo_root: Path, commit: str, arch: str, has_gpu: bool, log: Callable[[str], None]
) -> Fingerprints:
    """Every timing benchmark of ``commit`` on ``arch`` -> its fingerprint's parts (cached per kernels/ content)."""
    with gitutil.checkout(gitutil.open_repo(repo_root), commit) as tree:
        found = code_fingerprint.fingerprint_tree(tree, [arch], with_environment=True, log=log)
    if found.failure:
        log(f"fingerprint: {found.failure}; every benchmark of this commit is measured")
        return {}
    benchmark = f"bench_gemm.{'GemmOnGpu' if has_gpu else 'GemmOnCpu'}.track_time"
    out: Fingerprints = {}
    for bench in found.benchmarks.get(arch, []):
        fingerprint = found.fingerprints.get((bench["kernel"], bench["config"], arch))
        parts = fingerprint.parts() if fingerprint else {}
        known = bool(parts) and all(p.known for p in parts.values())
        out[records.benchmark_key(benchmark, (f"{bench['kernel']}:{bench['config']}", bench["shape"]))] = (
            {name: p.digest for name, p in parts.items() if p.digest is not None} if known else None
        )
    return out


@dataclass
class Recorded:
    """A commit of this machine whose measurements carry fingerprints."""

    commit: str
    fingerprints: dict[str, dict[str, str]]
    original: str  # the commit that was measured (itself, or what a copy was copied from)
    stamped_at: float = 0.0


def recorded(results_dir: Path, machine: str, kept: store.Store | None = None) -> dict[str, Recorded]:
    """commit -> its fingerprinted measurements, read from the machine's records beside asv's results (through
    ``kept``, the history store's summaries, when given: only new files are read)."""
    with contextlib.closing(store.Store(None)) if kept is None else contextlib.nullcontext(kept) as source:
        stamped = source.fingerprints(results_dir, machine)
    merged: dict[str, dict[str, Any]] = {}
    for commit, prints in stamped:  # a commit can have one results file per asv environment: fingerprints together
        if prints["of"]:
            into = merged.setdefault(commit, {"of": {}, "originals": set(), "at": 0.0})
            into["of"].update(prints["of"])
            into["originals"].update(prints["originals"])
            into["at"] = max(into["at"], prints["at"])
    return {
        commit: Recorded(
            commit,
            prints["of"],
            original=next(iter(prints["originals"])) if len(prints["originals"]) == 1 else commit,
            stamped_at=prints["at"],
        )
        for commit, prints in merged.items()
    }


def match(fingerprints: Fingerprints, candidates: Mapping[str, Recorded]) -> str | None:
    """The measured commit whose fingerprints equal these, benchmark for benchmark (newest first); None: measure."""
    if not fingerprints or any(v is None for v in fingerprints.values()):
        return None
    # Equal as a whole: a benchmark measured there but not here (or failed there: no fingerprint) means measure.
    same = [c for c in candidates.values() if c.fingerprints == fingerprints]
    if not same:
        return None
    best = max(same, key=lambda c: (c.original == c.commit, c.stamped_at))
    return best.original if best.original in candidates else best.commit


def stamp(results_dir: Path, machine: str, commit: str, fingerprints: Fingerprints, job: str) -> int:
    """Write each fingerprint into the record of this job's measurement of it; returns how many were stamped."""
    stamped = 0
    now = time.time()
    for sidecar, entries in folder.sidecars(results_dir, machine, commit[:8]):
        changes: dict[str, dict[str, Any] | None] = {
            key: {**record, "fingerprint": fingerprints[key], "fingerprint_at": now}
            for key, record in entries.items()
            if key in fingerprints
            and fingerprints[key] is not None
            and record["status"] == "measured"
            and job in (record.get("job"), record.get("resumed_by"))
            and not record.get("identical_to")
        }
        if changes:
            records.update(sidecar, changes)
            stamped += len(changes)
    return stamped


@dataclass
class Plan:
    measure: list[str] = field(default_factory=list)  # newest first, as asv takes them
    identical: dict[str, str] = field(default_factory=dict)  # commit -> the measured commit it equals: copied
    # commit -> whose results it holds (itself, or the measured commit copied under it by an earlier run): it has
    # results of this run's benchmarks on this machine already, so nothing is measured, copied or written for it
    already: dict[str, str] = field(default_factory=dict)
    fingerprints: dict[str, Fingerprints] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)  # commit -> why it is measured
    seconds: float = 0.0  # spent fingerprinting (CPU)


def plan(
    commits: Sequence[str],
    known: Mapping[str, Recorded],
    fingerprints_of: Callable[[str], Fingerprints],
    selected: Callable[[str], bool],
    *,
    remeasure: Sequence[str] = (),
) -> Plan:
    """Decide, oldest first, which of ``commits`` (newest first) to measure; a commit may equal an older one of
    this run that is measured in it. ``selected``: the asv keys this run measures; ``remeasure``: always measured."""
    started = time.monotonic()
    result = Plan()
    candidates = dict(known)
    for commit in reversed(commits):
        if commit in known and commit not in remeasure and any(selected(k) for k in known[commit].fingerprints):
            # Measured on this machine before (benchmarks of this run among them): not fingerprinted again (a compile
            # per arch), measured or copied again -- a run with nothing new changes no file; the scheduled run's
            # --remeasure measures a known commit again (drift from outside the code).
            result.already[commit] = known[commit].original if known[commit].original in candidates else commit
            continue
        prints = {k: v for k, v in fingerprints_of(commit).items() if selected(k)}
        result.fingerprints[commit] = prints
        same = match(prints, candidates)
        if commit in remeasure:
            result.reasons[commit] = "--remeasure"
        elif same is None:
            result.reasons[commit] = _why_measured(prints)
        else:
            result.identical[commit] = same
            continue
        result.measure.insert(0, commit)
        if prints and all(v is not None for v in prints.values()):
            candidates[commit] = Recorded(commit, dict(prints), commit, stamped_at=time.time())  # type: ignore[arg-type]
    result.seconds = time.monotonic() - started
    return result


def _why_measured(prints: Fingerprints) -> str:
    if not prints:
        return "no fingerprint (the commit's kernels could not be read, or nothing selected)"
    unknown = sorted(k for k, v in prints.items() if v is None)
    if unknown:
        return f"fingerprint unknown for {len(unknown)} benchmarks (e.g. {unknown[0]})"
    return "code differs from every measured commit"


def describe(plan_: Plan) -> list[str]:
    lines = [
        f"{c[:12]}: already measured on this machine: not measured again (--remeasure measures it again)"
        if c == s
        else f"{c[:12]}: already has the results of {s[:12]} (identical code) on this machine: not "
        "measured (--remeasure measures it)"
        for c, s in plan_.already.items()
    ]
    lines += [f"{c[:12]}: identical code to {s[:12]}: not measured" for c, s in plan_.identical.items()]
    lines += [f"{c[:12]}: measured ({plan_.reasons.get(c, '')})" for c in plan_.measure]
    return lines
