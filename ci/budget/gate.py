"""Register budget gate: a change must not grow any resource it has not budgeted on purpose.

    python -m ci.budget                      # HEAD vs merge-base with origin/main (or main)
    python -m ci.budget --base main --kernel flydsl_gfx950_4wave
    python -m ci.budget --working-tree       # your uncommitted edits vs the base
    python -m ci.budget --update-budget      # also write the tightened entries (ratchet)
    python -m ci.budget --json gate.json     # machine-readable verdict

How it works: HEAD (or ``--head``) and the merge-base of HEAD with ``--base`` are
each checked out in a temporary ``git worktree``, and this checkout's ``python -m
ci.budget.resources --json`` runs on each one's kernels (ci.common.commit_tree), so every commit
compiles *its own* kernels (without a GPU: Triton for sm_90/gfx950, FlyDSL for
gfx950) and one parser reads both. Then, per compile target
(kernel/arch/config), the head is compared with the base and with the committed
budget ``ci/register_budget.json`` (read from the head).

Compared, each with the base AND with the budget entry (``max_<field>``, or
``min_occupancy``): registers (total VGPRs per lane on gfx950, of 512; registers
per thread on sm_90, of 255), arch_vgpr, agpr, sgpr, shared_bytes (LDS / shared
memory per workgroup), occupancy (waves/SIMD or warps/SM: lower is worse),
accvgpr_copies and accvgpr_copies_in_loop (v_accvgpr_read/write/mov on gfx950;
n/a on sm_90); and with the base only: the spill and scratch counters.

A target FAILS when
  * it spills or uses scratch (AMD VGPR/SGPR spills, private segment, dynamic
    stack; NVIDIA spill stores/loads, stack frame, local memory) -- never budgetable;
  * its LDS / shared memory exceeds the hardware limit (gfx950: 160 KiB; sm_90:
    227 KiB per block) or it cannot launch (occupancy 0);
  * a field is worse than its budget entry by more than the field's tolerance;
  * a field is worse than at the base by more than its tolerance plus what this
    change's budget edit loosened for that field. Each field of the head's entry
    is compared with the base's entry: a loosened limit (``max_sgpr`` 68 -> 70)
    raises that field's allowance vs the base by exactly the loosening (2);
    tightened and unchanged fields exempt nothing, so tightening one field never
    excuses another. Where the base had the target but no entry for it, the
    base's measured numbers stand in for one; a new entry is accepted as a whole
    only for a target the base did not have;
  * a tolerance would cover a growth that lowers the occupancy the resource
    alone allows (e.g. SGPRs 99 -> 101 on gfx950: 8 -> 7 waves/SIMD) -- only a
    budget edit accepts a lost occupancy step;
  * it is in the base or the budget but no longer compiles / is gone at head
    (deleting its budget entry in the same change marks a removal as intended);
  * it has no budget entry (the gate prints the entry to add).
Every use of a tolerance or of a budget edit is printed as a note: nothing grows silently.

Tolerances (``default_tolerances`` in the budget file, each with its reason there;
a target may override one: ``"tolerance": {"sgpr": 4}``), in the field's unit:
  registers: 0 -- gfx950 allocates the 512-VGPR file in granules of 8 with
    occupancy steps at 64/72/80/96/128/168/256 total VGPRs; the FlyDSL kernel
    holds 408-418 (1 wave/SIMD) and its headroom is what the next optimization
    spends; growth inside a granule is free today but PRs add up to a granule.
    sm_90 allocates per warp in units of 256 (8 per thread) up to 255; the Triton
    configs sit at 194-250, 5 registers from where ptxas spills.
  arch_vgpr: 0 -- 256 addressable arch VGPRs; a value kept live across the K
    loop (+4) or accumulators leaving the AGPRs shows here first.
  agpr: 0 -- 256 AGPRs, part of the 512 total; new AGPR use outside the pinned
    accumulators is LLVM parking arch VGPRs there.
  sgpr: 2 -- on gfx950 SGPRs cost occupancy only above 100 (GFX9 rule: <=80 -> 10,
    <=88 -> 9, <=100 -> 8, else 7 waves, and gfx950 runs at most 8 waves/SIMD);
    the allocator trades VGPRs for an SGPR pair when it reschedules (4 fewer
    VGPRs for 1 more SGPR). 2 is one 64-bit scalar: it passes with a note; 3 or
    more fails (68 -> 71), and so does any growth crossing the step at 100.
  shared_bytes: 0 -- set by the code (tile x stages), so it never jitters.
    gfx950: 160 KiB per CU (the FlyDSL kernel's 128 KiB fits 1 workgroup per CU,
    2 need <= 80 KiB); sm_90: 227 KiB per block, 228 KiB per SM.
  occupancy: 0 -- already counted in whole steps; a lost wave/warp is never noise.
  accvgpr_copies: 0 -- deterministic for a source and compiler; the FlyDSL default
    config's 512 are its accumulators' zero-fill and read-out outside the loop.
  accvgpr_copies_in_loop: 0 -- run every K step: spill-like traffic (default
    config 0, intrinsic_acc 132 with its arch VGPRs full).
  vgpr_spills, sgpr_spills, spill_store_bytes, spill_load_bytes, scratch_bytes,
    dynamic_stack: 0, fixed -- must be 0 anyway.

Ratchet: when a passing target measures below its entry (after any reduction),
the gate prints the tightened entry to paste, and ``--update-budget`` writes it
into the budget file (atomically) -- it only ever lowers a max / raises
``min_occupancy``, and only for targets that passed.

Base: an explicit ``--base`` that does not resolve, or has no common ancestor
with the head, is an error (exit 2; in a shallow clone the message says how to
deepen it: ``git fetch --unshallow`` or ``git fetch --deepen=N origin <branch>:refs/remotes/origin/<branch>``). With no ``--base``, a missing origin/main and main is an error under
CI (``CI=true`` or ``GITHUB_ACTIONS=true``); elsewhere the head is checked
against the budget only, and the report says "no base: ... checked against
budget only" -- as it does on main itself (the merge-base is HEAD). Without
``--working-tree`` the gate checks a commit, and names every uncommitted file it
leaves out in a WARNING line. Selectors (``--kernel``/``--arch``/``--config``)
that match no target are an error.

Raising a budget is an explicit, reviewed edit of ci/register_budget.json; when the
gate fails it prints the entries that would accept the measured numbers.

Output: a head-vs-base table on stdout, progress on stderr, Markdown in
$GITHUB_STEP_SUMMARY when set, ``--json PATH`` (written atomically).
Exit: 0 pass, 1 gate failed, 2 harness error (bad or unresolvable ref, selectors
matching nothing, malformed budget, compiler output that cannot be parsed, ...),
with a one-line message.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.report import append_step_summary, markdown_table, text_table, write_json_atomic
from harness.resources import occupancy_by_resource

BUDGET_PATH = "ci/register_budget.json"
BUDGET_SCHEMA = "mxfp4-register-budget/2"
# The schema before per-field tolerances: read only from a base, to see what an edit changed.
LEGACY_BUDGET_SCHEMA = "mxfp4-register-budget/1"
RESULTS_SCHEMA = "mxfp4-resources/1"
GATE_SCHEMA = "mxfp4-budget-gate/2"
CHILD_TIMEOUT_S = 1800
DIRTY_FILES_SHOWN = 10


@dataclass(frozen=True)
class Metric:
    """One compared field of a resource record (harness.resources.ResourceUsage)."""

    field: str
    budget_key: str | None  # None: spills and scratch, which must be 0 and cannot be budgeted
    higher_is_worse: bool = True

    def worse_by(self, value: int, reference: int) -> int:
        """How much worse ``value`` is than ``reference`` (negative: better)."""
        return value - reference if self.higher_is_worse else reference - value

    def worsened(self, reference: int, amount: int) -> int:
        """``reference`` made worse by ``amount``."""
        return reference + amount if self.higher_is_worse else reference - amount

    def loosest(self, *values: int) -> int:
        return max(values) if self.higher_is_worse else min(values)

    def tightest(self, *values: int) -> int:
        return min(values) if self.higher_is_worse else max(values)

    @property
    def comparison(self) -> str:
        return ">" if self.higher_is_worse else "<"

    @property
    def grew(self) -> str:
        return "grew" if self.higher_is_worse else "dropped"


SPILL_FIELDS = ("vgpr_spills", "sgpr_spills", "spill_store_bytes", "spill_load_bytes", "scratch_bytes", "dynamic_stack")
METRICS = (
    Metric("registers", "max_registers"),
    Metric("arch_vgpr", "max_arch_vgpr"),
    Metric("agpr", "max_agpr"),
    Metric("sgpr", "max_sgpr"),
    Metric("shared_bytes", "max_shared_bytes"),
    Metric("occupancy", "min_occupancy", higher_is_worse=False),
    Metric("accvgpr_copies", "max_accvgpr_copies"),
    Metric("accvgpr_copies_in_loop", "max_accvgpr_copies_in_loop"),
    *(Metric(name, None) for name in SPILL_FIELDS),
)
METRIC_BY_FIELD = {m.field: m for m in METRICS}
BUDGET_KEYS = {m.budget_key: m for m in METRICS if m.budget_key}
# Which budget keys an entry must have (and may have), by arch family: every field the arch measures.
FAMILY_KEYS = {
    "gfx": tuple(BUDGET_KEYS),
    "sm": ("max_registers", "max_shared_bytes", "min_occupancy"),
}


class HarnessError(RuntimeError):
    """The gate could not decide (bad ref, malformed budget, unreadable results, selectors matching nothing)."""


# ---------------------------------------------------------------------------
# budget file
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    """Limits per target, and the tolerance of each compared field (defaults and per-target overrides)."""

    entries: Mapping[str, Mapping[str, int]]  # target -> {budget key: limit}
    default_tolerances: Mapping[str, int] = field(default_factory=dict)  # field -> tolerance
    tolerance_overrides: Mapping[str, Mapping[str, int]] = field(default_factory=dict)  # target -> {field: tolerance}
    schema: str = BUDGET_SCHEMA

    def tolerance(self, target: str, field_name: str) -> int:
        """How much worse ``field_name`` may be than its limit and its base value; 0 where unknown (a legacy budget)."""
        override = self.tolerance_overrides.get(target, {})
        return override.get(field_name, self.default_tolerances.get(field_name, 0))


def parse_budget(text: str, where: str, *, allow_legacy: bool = False) -> Budget:
    """Validate a budget file; every problem names the file and the key.

    ``allow_legacy``: also read the /1 schema (a base's budget from before per-field tolerances).
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{where}: expected a JSON object at the top level")
    if allow_legacy and data.get("schema") == LEGACY_BUDGET_SCHEMA:
        return _parse_legacy_budget(data, where)
    if data.get("schema") != BUDGET_SCHEMA:
        raise HarnessError(f"{where}: \"schema\" must be {BUDGET_SCHEMA!r}, got {data.get('schema')!r}")
    defaults = _parse_default_tolerances(data.get("default_tolerances"), f"{where}: default_tolerances")
    targets = data.get("targets")
    if not isinstance(targets, dict):
        raise HarnessError(f"{where}: \"targets\" must be an object of kernel/arch/config -> limits")
    entries, overrides = {}, {}
    for target, entry in targets.items():
        entries[target], override = _parse_entry(target, entry, f"{where}: targets[{target!r}]")
        if override:
            overrides[target] = override
    return Budget(entries, defaults, overrides, BUDGET_SCHEMA)


def _parse_default_tolerances(block: Any, where: str) -> dict[str, int]:
    if not isinstance(block, dict):
        raise HarnessError(f"{where}: must be an object of field -> {{\"tolerance\": N, \"why\": \"...\"}}")
    unknown = sorted(set(block) - set(METRIC_BY_FIELD))
    missing = [name for name in METRIC_BY_FIELD if name not in block]
    if unknown or missing:
        raise HarnessError(f"{where}: every compared field needs a tolerance and its reason; "
                           f"unknown {unknown}, missing {missing}")
    tolerances = {}
    for name, spec in block.items():
        if not isinstance(spec, dict) or set(spec) != {"tolerance", "why"}:
            raise HarnessError(f"{where}.{name}: expected {{\"tolerance\": N, \"why\": \"...\"}}, got {spec!r}")
        if not isinstance(spec["why"], str) or not spec["why"].strip():
            raise HarnessError(f"{where}.{name}.why: say what this tolerance protects (a non-empty string)")
        tolerances[name] = _check_tolerance(name, spec["tolerance"], f"{where}.{name}.tolerance")
    return tolerances


def _check_tolerance(name: str, value: Any, where: str) -> int:
    _check_count(value, where)
    if name in SPILL_FIELDS and value != 0:
        raise HarnessError(f"{where}: must be 0 -- spills and scratch cannot be tolerated")
    return value


def _parse_entry(target: str, entry: Any, where: str) -> tuple[dict[str, int], dict[str, int]]:
    parts = target.split("/")
    if len(parts) != 3 or not all(parts):
        raise HarnessError(f"{where}: the key must be kernel/arch/config")
    if not isinstance(entry, dict):
        raise HarnessError(f"{where}: expected an object of limits, got {type(entry).__name__}")
    family = "gfx" if parts[1].startswith("gfx") else "sm"
    allowed = FAMILY_KEYS[family]
    unknown = sorted(set(entry) - set(allowed) - {"tolerance"})
    if unknown:
        raise HarnessError(f"{where}: unknown key(s) {unknown} for {parts[1]}; known: {sorted(allowed) + ['tolerance']} "
                           "(spills and scratch cannot be budgeted: they must be 0)")
    missing = [key for key in allowed if key not in entry]
    if missing:
        raise HarnessError(f"{where}: missing required key(s) {missing}")
    limits = {key: value for key, value in entry.items() if key != "tolerance"}
    for key, value in limits.items():
        _check_count(value, f"{where}.{key}")
    override = entry.get("tolerance", {})
    if not isinstance(override, dict):
        raise HarnessError(f"{where}.tolerance: expected an object of field -> tolerance, e.g. {{\"sgpr\": 4}}")
    measured = {BUDGET_KEYS[key].field for key in allowed} | set(SPILL_FIELDS)
    for name, value in override.items():
        if name not in measured:
            raise HarnessError(f"{where}.tolerance: unknown field {name!r} for {parts[1]}; known: {sorted(measured)}")
        _check_tolerance(name, value, f"{where}.tolerance.{name}")
    return limits, dict(override)


def _parse_legacy_budget(data: Mapping[str, Any], where: str) -> Budget:
    """The /1 schema: limits only are needed (its one tolerance covered registers and arch VGPRs)."""
    targets = data.get("targets")
    if not isinstance(targets, dict):
        raise HarnessError(f"{where}: \"targets\" must be an object")
    entries = {}
    for target, entry in targets.items():
        if not isinstance(entry, dict):
            raise HarnessError(f"{where}: targets[{target!r}]: expected an object")
        entries[target] = {k: v for k, v in entry.items() if k in BUDGET_KEYS and isinstance(v, int)}
    return Budget(entries, {}, {}, LEGACY_BUDGET_SCHEMA)


def _check_count(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HarnessError(f"{where}: must be a non-negative integer, got {value!r}")


def suggested_entry(usage: Mapping[str, Any], old: Mapping[str, Any] | None) -> dict[str, Any]:
    """The budget entry that accepts ``usage`` exactly (keeps the old entry's tolerance overrides)."""
    entry: dict[str, Any] = {}
    for key, metric in BUDGET_KEYS.items():
        if usage.get(metric.field) is not None:
            entry[key] = int(usage[metric.field])
    if isinstance((old or {}).get("tolerance"), dict) and old["tolerance"]:
        entry["tolerance"] = dict(old["tolerance"])
    return entry


# ---------------------------------------------------------------------------
# measuring a checkout
# ---------------------------------------------------------------------------


@dataclass
class Measurement:
    results: dict[str, dict[str, Any]] | None  # None: this checkout has no kernels package
    note: str = ""


def measure_tree(tree: Path, label: str, only: Mapping[str, str | None]) -> Measurement:
    """Compile ``tree``'s kernels and read them with THIS checkout's ``ci.budget.resources`` and harness parser.

    Only the code under test comes from the commit (ci.common.commit_tree), so base and
    head are read by one parser and one resource model: a parser change can never
    show up as a register change between them.
    """
    from ci.common.commit_tree import has_kernels, kernels_of, run_forwarding_stderr

    if not has_kernels(tree):
        return Measurement(None, f"{label} has no kernels package")
    with kernels_of(tree) as (folder, env):
        out = folder / "resources.json"
        cmd = [sys.executable, "-m", "ci.budget.resources", "--json", str(out), "--allow-empty"]
        cmd += [f"--{name}={value}" for name, value in only.items() if value]
        print(f"budget_gate: measuring {label} in {tree}", file=sys.stderr, flush=True)
        run = run_forwarding_stderr(cmd, cwd=folder, env=env, timeout_s=CHILD_TIMEOUT_S,
                                    log=lambda line: print(f"  [{label}] {line}", file=sys.stderr, flush=True))
        if run.timed_out:
            raise HarnessError(f"{' '.join(cmd)} took over {CHILD_TIMEOUT_S} s in {tree}")
        returncode, stderr_tail = run.returncode, run.tail()
        # Exit 2 with a report: a target whose compiler output cannot be parsed (load_results names it).
        if returncode not in (0, 1, 2) or not out.exists():
            raise HarnessError(f"ci.budget.resources failed in the {label} checkout (exit {returncode}): {stderr_tail}")
        text = out.read_text()
    return Measurement(load_results(text, f"{label} ci.budget.resources JSON", tree))


def load_results(text: str, where: str, tree: Path | None = None) -> dict[str, dict[str, Any]]:
    """Validate ci.budget.resources JSON: ``{target: {"ok": bool, "usage"|"error": ...}}``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("schema") != RESULTS_SCHEMA or not isinstance(data.get("targets"), dict):
        raise HarnessError(f"{where}: not a {RESULTS_SCHEMA} report")
    if tree is not None and data.get("source_root") and Path(data["source_root"]).resolve() != tree.resolve():
        raise HarnessError(f"{where}: measured the kernels in {data['source_root']}, not the checkout {tree}")
    results = data["targets"]
    for target, result in results.items():
        if not isinstance(result, dict) or not isinstance(result.get("ok"), bool):
            raise HarnessError(f"{where}: targets[{target!r}] has no boolean \"ok\"")
        if result.get("kind") == "parse":
            raise HarnessError(f"{where}: cannot parse the compiler output of {target}: {result.get('error')}")
        if result["ok"]:
            usage = result.get("usage")
            needed = {"arch", "threads_per_group", "shared_limit", "occupancy_unit", *METRIC_BY_FIELD}
            if not isinstance(usage, dict) or not needed <= set(usage):
                raise HarnessError(f"{where}: targets[{target!r}].usage lacks {sorted(needed - set(usage or {}))}")
    return results


# ---------------------------------------------------------------------------
# the verdict
# ---------------------------------------------------------------------------


@dataclass
class TargetCheck:
    target: str
    status: str  # "pass" | "fail" | "removed"
    reasons: list[str] = field(default_factory=list)  # why it failed
    notes: list[str] = field(default_factory=list)  # what passed but deserves a look (tolerance, budget edit)
    head: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    budget: dict[str, Any] | None = None
    suggested_budget: dict[str, Any] | None = None  # failed: the entry that accepts the head
    tightened_budget: dict[str, Any] | None = None  # passed below its entry: the ratchet


def evaluate(
    head: Mapping[str, Mapping[str, Any]],
    base: Mapping[str, Mapping[str, Any]] | None,
    budget: Budget,
    base_budget: Budget | None,
    selected=lambda target: True,
) -> list[TargetCheck]:
    """One check per target in head, base or budget (those ``selected``)."""
    names = set(head) | set(base or {}) | set(budget.entries)
    return [
        _check_target(name, head.get(name), (base or {}).get(name), budget, base_budget)
        for name in sorted(names)
        if selected(name)
    ]


def _check_target(name, head_result, base_result, budget: Budget, base_budget: Budget | None) -> TargetCheck:
    entry = budget.entries.get(name)
    base_entry = None if base_budget is None else base_budget.entries.get(name)
    check = TargetCheck(name, "pass", budget=_entry_with_overrides(budget, name))
    check.base = (base_result or {}).get("usage")
    if head_result is None:
        if entry is None and base_entry is not None:
            check.status, check.notes = "removed", ["gone at head; its budget entry was deleted in this change"]
            return check
        where = " and ".join(w for w, present in (("the base", base_result), ("the budget", entry)) if present)
        check.reasons.append(f"no longer compiled at head: listed in {where} but not by head's registry")
    elif not head_result["ok"]:
        check.reasons.append(f"does not compile at head: {head_result.get('error', '?')}")
    else:
        usage = check.head = head_result["usage"]
        base_usage = base_result["usage"] if base_result is not None and base_result["ok"] else None
        if base_result is not None and base_usage is None:
            check.notes.append("fixed: the base failed to compile")
        _check_hard_limits(check, usage)
        if entry is None:
            check.reasons.append(f"no budget entry in {BUDGET_PATH}")
        elif base_usage is not None and base_entry is None:
            check.notes.append("the base had this target but no budget entry: its measured numbers stand in for one, "
                               "so this entry exempts only what it sets above them")
        needed: dict[str, int] = {}
        for metric in METRICS:
            limit = _check_metric(check, metric, usage, base_usage, entry, base_entry, budget, base_budget)
            if limit is not None:
                needed[metric.budget_key] = limit
        if check.reasons and not any(r.startswith("spills") for r in check.reasons):
            check.suggested_budget = _accepting_entry(usage, entry, needed, budget.tolerance_overrides.get(name))
        elif not check.reasons and entry is not None:
            check.tightened_budget = _tightened_entry(usage, entry, budget.tolerance_overrides.get(name))
    check.status = "fail" if check.reasons else "pass"
    return check


def _entry_with_overrides(budget: Budget, name: str) -> dict[str, Any] | None:
    entry = budget.entries.get(name)
    if entry is None:
        return None
    override = budget.tolerance_overrides.get(name)
    return dict(entry, tolerance=dict(override)) if override else dict(entry)


def _check_hard_limits(check: TargetCheck, usage: Mapping[str, Any]) -> None:
    spills = {f: int(usage[f]) for f in SPILL_FIELDS if usage.get(f)}
    if spills:
        check.reasons.append("spills/scratch must be 0: " + ", ".join(f"{k}={v}" for k, v in spills.items()))
    if usage["shared_bytes"] > usage["shared_limit"]:
        check.reasons.append(f"shared memory/LDS {usage['shared_bytes']} B exceeds the hardware limit {usage['shared_limit']} B")
    elif usage["occupancy"] == 0:
        check.reasons.append(f"occupancy 0: cannot launch ({usage.get('occupancy_limited_by')})")


def _check_metric(check, metric: Metric, usage, base_usage, entry, base_entry, budget: Budget,
                  base_budget: Budget | None) -> int | None:
    """Compare one field with its budget limit and its base value; return the limit that would accept it, or None."""
    if usage.get(metric.field) is None:
        return None  # not measured on this arch (AGPRs, SGPRs, copies on sm_90; spill bytes on gfx950)
    name, value = metric.field, int(usage[metric.field])
    tolerance = budget.tolerance(check.target, name)
    key = metric.budget_key
    limit = None if entry is None or key is None else entry.get(key)
    needed = None

    if limit is not None:
        over = metric.worse_by(value, limit)
        step = _lost_occupancy_step(name, usage, limit) if 0 < over <= tolerance else None
        if over > tolerance or step:
            beyond = f" by {over}, more than its tolerance {tolerance}" if tolerance and over > tolerance else ""
            check.reasons.append(f"{name} {value} {metric.comparison} budget {key} {limit}{beyond}" + (f", which {step}" if step else ""))
            needed = value
        elif over > 0:
            check.notes.append(f"{name} {value} {metric.comparison} budget {key} {limit} by {over}: within its tolerance {tolerance}")

    before = None if base_usage is None or base_usage.get(name) is None else int(base_usage[name])
    if before is None:
        return needed
    growth = metric.worse_by(value, before)
    if growth <= 0:
        return needed
    # What this change's budget edit loosened for this field. A base without an entry (or a
    # legacy one without this key) is taken at its measured value: an entry is no blank cheque.
    base_limit = before if base_entry is None or key not in base_entry else base_entry[key]
    loosening = max(0, metric.worse_by(limit, base_limit)) if limit is not None and key is not None else 0
    change = f"{name} {metric.grew} by {growth} vs base ({before} -> {value})"
    edit = f"{key} {base_limit} -> {limit}"
    if growth <= loosening:
        check.notes.append(f"{change}: accepted by this change's budget edit ({edit})")
        return needed
    step = _lost_occupancy_step(name, usage, metric.worsened(before, loosening)) if growth <= loosening + tolerance else None
    if growth <= loosening + tolerance and not step:
        raised = ""
        if base_budget is not None and base_budget.schema == BUDGET_SCHEMA:
            base_tolerance = base_budget.tolerance(check.target, name)
            if base_tolerance < tolerance:
                raised = f"; this change raises its tolerance {base_tolerance} -> {tolerance}"
        by_edit = f" plus {loosening} from this change's budget edit ({edit})" if loosening else ""
        check.notes.append(f"{change}: within its tolerance {tolerance}{by_edit}{raised}")
        return needed
    allowed = f"allowed {loosening + tolerance} (tolerance {tolerance}" + (
        f" + {loosening} loosened by this change's budget edit: {edit})" if loosening else ")")
    check.reasons.append(f"{change}, " + (f"which {step}" if step else allowed))
    if key is not None:
        # The limit whose loosening over the base's admits the growth (the tolerance cannot cover a lost step).
        required = metric.worsened(base_limit, growth if step else growth - tolerance)
        needed = required if needed is None else metric.loosest(needed, required)
    return needed


def _lost_occupancy_step(name: str, usage: Mapping[str, Any], from_value: int) -> str | None:
    """Why ``name`` going from ``from_value`` to its value at head costs occupancy on its own; None when it does not."""
    try:
        now = occupancy_by_resource(usage).get(name)
        then = occupancy_by_resource(dict(usage, **{name: from_value})).get(name)
    except (KeyError, ValueError):  # no occupancy model for this arch or record
        return None
    if now is None or then is None or now >= then:
        return None
    return f"crosses an occupancy step ({name} alone allows {then} -> {now} {usage['occupancy_unit']}): no tolerance covers that, only a budget edit"


def _accepting_entry(usage, entry, needed: Mapping[str, int], override) -> dict[str, Any]:
    """The entry that accepts the head: each limit loosened just as far as its failing check needs."""
    accepting = {}
    for key, metric in BUDGET_KEYS.items():
        if usage.get(metric.field) is None:
            continue
        candidates = [int(usage[metric.field]) if entry is None or key not in entry else entry[key]]
        if key in needed:
            candidates.append(needed[key])
        accepting[key] = metric.loosest(*candidates)
    if override:
        accepting["tolerance"] = dict(override)
    return accepting


def _tightened_entry(usage, entry, override) -> dict[str, Any] | None:
    """The entry lowered to what the head uses where it uses less (never loosened); None when already tight."""
    tightened = dict(entry)
    for key, limit in entry.items():
        value = usage.get(BUDGET_KEYS[key].field)
        if value is not None:
            tightened[key] = BUDGET_KEYS[key].tightest(limit, int(value))
    if tightened == dict(entry):
        return None
    return dict(tightened, tolerance=dict(override)) if override else tightened


# ---------------------------------------------------------------------------
# reporting
# ---------------------------------------------------------------------------


def _delta(base: Mapping | None, head: Mapping | None, name: str) -> str:
    h = None if head is None else head.get(name)
    b = None if base is None else base.get(name)
    if h is None:
        return "-" if b is None else f"{b} -> gone"
    if b is None or b == h:
        return str(h)
    return f"{b} -> {h} ({h - b:+d})"


def table_rows(checks: Iterable[TargetCheck]) -> list[dict[str, str]]:
    rows = []
    for c in checks:
        head, base = c.head, c.base
        spills = ", ".join(f"{f}={head[f]}" for f in SPILL_FIELDS if head and head.get(f)) or ("0" if head else "-")
        limit = "" if head is None else f"/{head.get('register_limit')}"
        rows.append(
            {
                "target": c.target,
                "status": c.status.upper(),
                "regs": _delta(base, head, "registers") + limit,
                "arch_vgpr": _delta(base, head, "arch_vgpr"),
                "agpr": _delta(base, head, "agpr"),
                "sgpr": _delta(base, head, "sgpr"),
                "shared_B": _delta(base, head, "shared_bytes"),
                "occupancy": _delta(base, head, "occupancy") + ("" if head is None else f" {head.get('occupancy_unit')}"),
                "acc_copies": _delta(base, head, "accvgpr_copies"),
                "in_loop": _delta(base, head, "accvgpr_copies_in_loop"),
                "spills": spills,
                "why": "; ".join(_clip(text, 240) for text in c.reasons + c.notes),
            }
        )
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def suggested_edits(checks: Iterable[TargetCheck]) -> dict[str, dict[str, Any]]:
    return {c.target: c.suggested_budget for c in checks if c.status == "fail" and c.suggested_budget}


def tightened_edits(checks: Iterable[TargetCheck]) -> dict[str, dict[str, Any]]:
    return {c.target: c.tightened_budget for c in checks if c.status == "pass" and c.tightened_budget}


def _entries_text(edits: Mapping[str, Mapping[str, Any]]) -> str:
    return ",\n".join(f"    {json.dumps(t)}: {json.dumps(e)}" for t, e in sorted(edits.items()))


def render_suggestion(edits: Mapping[str, Mapping[str, Any]]) -> str:
    if not edits:
        return ""
    return (
        f"To accept these numbers on purpose, edit {BUDGET_PATH} -- under \"targets\", set:\n{_entries_text(edits)}\n"
        "(spills, scratch, LDS over the hardware limit and compile failures cannot be accepted by a budget edit)"
    )


def render_ratchet(edits: Mapping[str, Mapping[str, Any]]) -> str:
    if not edits:
        return ""
    return (
        f"Ratchet: these targets now use less than their budget. Tighten {BUDGET_PATH} so the next change cannot "
        f"spend the room silently -- under \"targets\", set (or rerun with --update-budget):\n{_entries_text(edits)}"
    )


def dirty_warning(files: list[str], head_sha: str) -> str:
    if not files:
        return ""
    shown = ", ".join(files[:DIRTY_FILES_SHOWN]) + (f" and {len(files) - DIRTY_FILES_SHOWN} more" if len(files) > DIRTY_FILES_SHOWN else "")
    return (f"budget_gate: WARNING: {len(files)} uncommitted file(s) NOT measured (this run checks commit "
            f"{head_sha[:12]}; add --working-tree to include them): {shown}")


def markdown_summary(verdict: str, base_note: str, rows, suggestion: str, ratchet: str = "", dirty: str = "") -> str:
    parts = [f"### Register budget gate: {verdict.upper()}", ""]
    if dirty:
        parts += [f"**{dirty}**", ""]
    parts += [base_note, "", markdown_table(rows)]
    for block in (suggestion, ratchet):
        if block:
            parts += ["", "```", block, "```"]
    return "\n".join(parts)


def update_budget_file(path: Path, edits: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Write ``edits`` into the budget file at ``path``, only where they tighten its current limits.

    Returns what changed: ``{target: {key: new limit}}``. The file is rewritten atomically
    (harness.report); targets it does not have are left alone (the ratchet adds no entry).
    """
    data = json.loads(path.read_text())
    changed: dict[str, dict[str, int]] = {}
    for target, edit in edits.items():
        current = data.get("targets", {}).get(target)
        if not isinstance(current, dict):
            continue
        for key, limit in edit.items():
            if key not in BUDGET_KEYS or not isinstance(current.get(key), int):
                continue
            tighter = BUDGET_KEYS[key].tightest(current[key], limit)
            if tighter != current[key]:
                current[key] = tighter
                changed.setdefault(target, {})[key] = tighter
    if changed:
        parse_budget(json.dumps(data), str(path))  # never write a file the gate itself would reject
        write_json_atomic(path, data)
    return changed


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.budget",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", metavar="REF", help="compare with the merge-base of HEAD and REF (default: origin/main, else main)")
    parser.add_argument("--head", metavar="REF", default="HEAD", help="the commit to check (default: HEAD)")
    parser.add_argument("--working-tree", action="store_true", help="check the current files (uncommitted edits too) instead of a commit; the base may then be HEAD itself")
    parser.add_argument("--budget", metavar="PATH", help=f"budget file to use (default: {BUDGET_PATH} of the head)")
    parser.add_argument("--update-budget", action="store_true",
                        help=f"write the tightened entries of passing targets into --budget or the working tree's {BUDGET_PATH} (only ever tightens)")
    parser.add_argument("--kernel", help="only targets of this kernel")
    parser.add_argument("--arch", help="only targets of this architecture (gfx950, sm_90)")
    parser.add_argument("--config", help="only targets with this config name")
    parser.add_argument("--repo", metavar="DIR", default=".", help="the git repository (default: the current directory)")
    parser.add_argument("--json", metavar="PATH", help="write the verdict as JSON (atomically)")
    parser.add_argument("--traceback", action="store_true", help="show the Python traceback of a harness error")
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    args = _parser().parse_args(None if argv is None else list(argv))
    try:
        return _run(args)
    except Exception as exc:
        if args.traceback:
            raise
        from ci.common.gitutil import GitError

        kind = "error" if isinstance(exc, (HarnessError, GitError)) else f"internal error ({type(exc).__name__})"
        print(f"budget_gate: {kind}: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from contextlib import nullcontext

    from ci.common import gitutil

    repo = gitutil.open_repo(args.repo)
    head_sha = gitutil.resolve_commit(repo, "HEAD" if args.working_tree else args.head)
    base = gitutil.resolve_base(repo, head_sha, args.base, head_may_be_base=args.working_tree)
    head_label = "working tree" if args.working_tree else f"head {args.head} ({head_sha[:12]})"
    print(f"budget_gate: {head_label}; {base.note}", file=sys.stderr, flush=True)
    dirty_files = [] if args.working_tree else gitutil.uncommitted_files(repo)  # what a commit-based run leaves out
    dirty = dirty_warning(dirty_files, head_sha)
    if dirty:
        print(dirty, file=sys.stderr, flush=True)

    only = {"kernel": args.kernel, "arch": args.arch, "config": args.config}
    head_tree = nullcontext(Path(repo.working_tree_dir)) if args.working_tree else gitutil.checkout(repo, head_sha)
    with head_tree as head_dir:
        budget_path = Path(args.budget) if args.budget else head_dir / BUDGET_PATH
        if not budget_path.exists():
            raise HarnessError(f"budget file {budget_path} does not exist")
        budget = parse_budget(budget_path.read_text(), str(args.budget or BUDGET_PATH))
        head = measure_tree(head_dir, "head", only)
    if head.results is None:
        raise HarnessError(f"the head has no ci/budget/resources.py ({head.note})")

    base_results, base_budget, base_note = None, None, base.note
    if base.sha is not None:
        base_budget = _base_budget(repo, base.sha)
        with gitutil.checkout(repo, base.sha) as base_dir:
            measured = measure_tree(base_dir, "base", only)
        base_results = measured.results
        if base_results is None:
            base_note += f"; {measured.note}: checked against budget only"

    def selected(target: str) -> bool:
        return all(value in (None, part) for value, part in zip(only.values(), target.split("/")))

    checks = evaluate(head.results, base_results, budget, base_budget, selected)
    if not checks:
        raise HarnessError(_nothing_selected(only, set(head.results) | set(base_results or {}) | set(budget.entries)))
    verdict = "fail" if any(c.status == "fail" for c in checks) else "pass"
    rows = table_rows(checks)
    edits, tightened = suggested_edits(checks), tightened_edits(checks)
    suggestion, ratchet = render_suggestion(edits), render_ratchet(tightened)

    updated: dict[str, dict[str, int]] = {}
    update_path = Path(args.budget) if args.budget else Path(repo.working_tree_dir) / BUDGET_PATH
    if args.update_budget and tightened:
        updated = update_budget_file(update_path, tightened)

    print(f"{base_note}\n")
    print(text_table(rows))
    for block in (suggestion, ratchet):
        if block:
            print("\n" + block)
    if args.update_budget:
        print("\nbudget_gate: --update-budget: " + (
            f"tightened {', '.join(f'{t} ({json.dumps(c)})' for t, c in sorted(updated.items()))} in {update_path}"
            if updated else f"nothing to tighten in {update_path}"))
    if dirty:
        print("\n" + dirty)
    failed = [c.target for c in checks if c.status == "fail"]
    print(f"\nbudget_gate: {verdict.upper()}" + (f": {len(failed)} target(s) failed: {', '.join(failed)}" if failed else
                                               f": {len(checks)} target(s) checked"))
    append_step_summary(markdown_summary(verdict, base_note, rows, suggestion, ratchet, dirty))
    if args.json:
        write_json_atomic(
            args.json,
            {
                "schema": GATE_SCHEMA,
                "verdict": verdict,
                "base": {"ref": base.ref, "sha": base.sha, "note": base_note},
                "head": {"ref": args.head, "sha": head_sha, "working_tree": bool(args.working_tree)},
                "uncommitted_files_not_measured": dirty_files,
                "targets": [asdict(c) for c in checks],
                "suggested_budget": edits,
                "tightened_budget": tightened,
                "budget_updated": {"path": str(update_path), "changes": updated} if updated else None,
            },
        )
    return 1 if verdict == "fail" else 0


def _nothing_selected(only: Mapping[str, str | None], names: set[str]) -> str:
    asked = " ".join(f"--{k} {v}" for k, v in only.items() if v)
    if not asked:
        return "no compile target and no budget entry: nothing was checked"
    known = [sorted({n.split("/")[i] for n in names}) for i in range(3)]
    return (f"{asked} matches no target at head, base or in the budget; known kernels: {', '.join(known[0]) or '-'}; "
            f"archs: {', '.join(known[1]) or '-'}; configs: {', '.join(known[2]) or '-'}")


def _base_budget(repo, sha: str) -> Budget | None:
    """The base's budget (to see what this change's edit loosened); None when absent or unreadable there."""
    from ci.common import gitutil

    text = gitutil.read_file(repo, sha, BUDGET_PATH)
    if text is None:
        return None
    try:
        return parse_budget(text, f"{BUDGET_PATH} at base", allow_legacy=True)
    except HarnessError as exc:
        print(f"budget_gate: note: ignoring the base's budget ({exc}); its measured numbers stand in for it",
              file=sys.stderr)
        return None


if __name__ == "__main__":
    sys.exit(main())
