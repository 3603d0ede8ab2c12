"""Register budget gate: a change must not grow register use, spill, or outgrow LDS.

    python -m ci.budget_gate                      # HEAD vs merge-base with origin/main (or main)
    python -m ci.budget_gate --base main --kernel flydsl_gfx950_4wave
    python -m ci.budget_gate --working-tree       # your uncommitted edits vs the base
    python -m ci.budget_gate --json gate.json     # machine-readable verdict

How it works: HEAD (or ``--head``) and the merge-base of HEAD with ``--base`` are
each checked out in a temporary ``git worktree``, and this checkout's ``python -m
ci.resources --json`` runs on each one's kernels (ci.commit_tree), so every commit
compiles *its own* kernels (without a GPU: Triton for sm_90/gfx950, FlyDSL for
gfx950) and one parser reads both. Then, per compile target
(kernel/arch/config), the head is compared with the base and with the committed
budget ``ci/register_budget.json`` (read from the head).

A target FAILS when
  * it spills or uses scratch (AMD VGPR/SGPR spills, private segment, dynamic
    stack; NVIDIA spill stores/loads, stack frame, local memory) -- never budgetable;
  * its LDS / shared memory exceeds the hardware limit (gfx950: 160 KiB; sm_90:
    227 KiB per block) or it cannot launch (occupancy 0);
  * it exceeds its budget entry: max_registers (total VGPRs on gfx950, i.e. 512
    minus headroom; registers/thread on sm_90), max_arch_vgpr, max_agpr,
    max_sgpr, max_shared_bytes, min_occupancy;
  * its register headroom or arch-VGPR headroom shrank vs the base by more than
    the entry's ``tolerance`` (default 0) -- unless this change also edits that
    target's budget entry, which is how an increase is accepted on purpose (a
    base without a budget file counts as every entry being new);
  * it is in the base or the budget but no longer compiles / is gone at head
    (deleting its budget entry in the same change marks a removal as intended);
  * it has no budget entry (the gate prints the entry to add).

With no base -- a fresh single-commit or shallow clone where --base does not
resolve, a merge-base equal to HEAD, or neither origin/main nor main -- the head
is checked against the budget only, and the report says "no base: ... checked
against budget only".

Raising a budget is an explicit, reviewed edit of ci/register_budget.json; when the
gate fails it prints the entries that would accept the measured numbers.

Output: a head-vs-base table on stdout, progress on stderr, Markdown in
$GITHUB_STEP_SUMMARY when set, ``--json PATH`` (written atomically).
Exit: 0 pass, 1 gate failed, 2 harness error (bad ref, malformed budget, compiler
output that cannot be parsed, ...), with a one-line message.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from harness.report import append_step_summary, markdown_table, text_table, write_json_atomic

BUDGET_PATH = "ci/register_budget.json"
BUDGET_SCHEMA = "mxfp4-register-budget/1"
RESULTS_SCHEMA = "mxfp4-resources/1"
GATE_SCHEMA = "mxfp4-budget-gate/1"

# Budget keys: (field of the resource record, comparison). "max": head <= value.
BUDGET_LIMITS = {
    "max_registers": ("registers", "max"),
    "max_arch_vgpr": ("arch_vgpr", "max"),
    "max_agpr": ("agpr", "max"),
    "max_sgpr": ("sgpr", "max"),
    "max_shared_bytes": ("shared_bytes", "max"),
    "min_occupancy": ("occupancy", "min"),
}
REQUIRED_KEYS = {"gfx": ("max_registers", "max_arch_vgpr", "max_sgpr", "max_shared_bytes"), "sm": ("max_registers", "max_shared_bytes")}
SPILL_FIELDS = ("vgpr_spills", "sgpr_spills", "spill_store_bytes", "spill_load_bytes", "scratch_bytes", "dynamic_stack")
# Register counts whose headroom must not shrink vs the base (beyond the tolerance).
HEADROOM_FIELDS = (("registers", "register headroom"), ("arch_vgpr", "arch-VGPR headroom"))
CHILD_TIMEOUT_S = 1800


class HarnessError(RuntimeError):
    """The gate could not decide (bad ref, malformed budget, unreadable results)."""


# ---------------------------------------------------------------------------
# budget file
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Budget:
    entries: Mapping[str, Mapping[str, int]]
    default_tolerance: int = 0

    def tolerance(self, target: str) -> int:
        return self.entries.get(target, {}).get("tolerance", self.default_tolerance)


def parse_budget(text: str, where: str) -> Budget:
    """Validate a budget file; every problem names the file and the key."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise HarnessError(f"{where}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise HarnessError(f"{where}: expected a JSON object at the top level")
    if data.get("schema") != BUDGET_SCHEMA:
        raise HarnessError(f"{where}: \"schema\" must be {BUDGET_SCHEMA!r}, got {data.get('schema')!r}")
    default_tolerance = data.get("default_tolerance", 0)
    _check_count(default_tolerance, f"{where}: default_tolerance")
    targets = data.get("targets")
    if not isinstance(targets, dict):
        raise HarnessError(f"{where}: \"targets\" must be an object of kernel/arch/config -> limits")
    entries = {}
    for target, entry in targets.items():
        entries[target] = _parse_entry(target, entry, f"{where}: targets[{target!r}]")
    return Budget(entries=entries, default_tolerance=default_tolerance)


def _parse_entry(target: str, entry: Any, where: str) -> dict[str, int]:
    parts = target.split("/")
    if len(parts) != 3 or not all(parts):
        raise HarnessError(f"{where}: the key must be kernel/arch/config")
    if not isinstance(entry, dict):
        raise HarnessError(f"{where}: expected an object of limits, got {type(entry).__name__}")
    unknown = sorted(set(entry) - set(BUDGET_LIMITS) - {"tolerance"})
    if unknown:
        raise HarnessError(f"{where}: unknown key(s) {unknown}; known: {sorted(BUDGET_LIMITS) + ['tolerance']} "
                           "(spills and scratch cannot be budgeted: they must be 0)")
    family = "gfx" if parts[1].startswith("gfx") else "sm"
    missing = [key for key in REQUIRED_KEYS[family] if key not in entry]
    if missing:
        raise HarnessError(f"{where}: missing required key(s) {missing}")
    for key, value in entry.items():
        _check_count(value, f"{where}.{key}")
    return dict(entry)


def _check_count(value: Any, where: str) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HarnessError(f"{where}: must be a non-negative integer, got {value!r}")


def suggested_entry(usage: Mapping[str, Any], old: Mapping[str, int] | None) -> dict[str, int]:
    """The budget entry that accepts ``usage`` exactly (keeps the old tolerance)."""
    entry = {}
    for key, (name, _) in BUDGET_LIMITS.items():
        if usage.get(name) is not None:
            entry[key] = int(usage[name])
    entry["tolerance"] = (old or {}).get("tolerance", 0)
    return entry


# ---------------------------------------------------------------------------
# measuring a checkout
# ---------------------------------------------------------------------------


@dataclass
class Measurement:
    results: dict[str, dict[str, Any]] | None  # None: this checkout has no ci/resources.py
    note: str = ""


def measure_tree(tree: Path, label: str, only: Mapping[str, str | None]) -> Measurement:
    """Compile ``tree``'s kernels and read them with THIS checkout's ``ci.resources`` and harness parser.

    Only the code under test comes from the commit (ci.commit_tree), so base and
    head are read by one parser and one resource model: a parser change can never
    show up as a register change between them.
    """
    from ci.commit_tree import has_kernels, kernels_of

    if not has_kernels(tree):
        return Measurement(None, f"{label} has no kernels package")
    with kernels_of(tree) as (folder, env):
        out = folder / "resources.json"
        cmd = [sys.executable, "-m", "ci.resources", "--json", str(out), "--allow-empty"]
        cmd += [f"--{name}={value}" for name, value in only.items() if value]
        print(f"budget_gate: measuring {label} in {tree}", file=sys.stderr, flush=True)
        returncode, stderr_tail = _run_forwarding_stderr(cmd, folder, env, prefix=f"  [{label}] ")
        # Exit 2 with a report: a target whose compiler output cannot be parsed (load_results names it).
        if returncode not in (0, 1, 2) or not out.exists():
            raise HarnessError(f"ci.resources failed in the {label} checkout (exit {returncode}): {stderr_tail}")
        text = out.read_text()
    return Measurement(load_results(text, f"{label} ci.resources JSON", tree))


def _run_forwarding_stderr(cmd, cwd, env, prefix: str) -> tuple[int, str]:
    """Run ``cmd`` (its table is not needed: the JSON is); echo its stderr (progress) with
    ``prefix``; return the exit code and the last meaningful stderr line."""
    proc = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []

    def pump() -> None:
        for line in proc.stderr:
            lines.append(line.rstrip())
            print(prefix + line.rstrip(), file=sys.stderr, flush=True)

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        returncode = proc.wait(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise HarnessError(f"{' '.join(cmd)} took over {CHILD_TIMEOUT_S} s in {cwd}") from None
    reader.join(timeout=10)
    useful = [line for line in lines if line.strip() and "Warning" not in line]
    return returncode, (useful[-1] if useful else "(no output)")


def load_results(text: str, where: str, tree: Path | None = None) -> dict[str, dict[str, Any]]:
    """Validate ci.resources JSON: ``{target: {"ok": bool, "usage"|"error": ...}}``."""
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
            needed = {"registers", "shared_bytes", "shared_limit", "occupancy", *SPILL_FIELDS}
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
    notes: list[str] = field(default_factory=list)  # what passed but deserves a look
    head: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    budget: dict[str, int] | None = None
    suggested_budget: dict[str, int] | None = None


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
    edited_here = entry is not None and entry != base_entry
    check = TargetCheck(name, "pass", budget=dict(entry) if entry else None)
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
        _check_hard_limits(check, usage)
        _check_budget(check, usage, entry)
        if base_result is not None and base_result["ok"]:
            _check_vs_base(check, usage, base_result["usage"], budget.tolerance(name), edited_here)
        elif base_result is not None:
            check.notes.append("fixed: the base failed to compile")
        if check.reasons and not any(r.startswith("spills") for r in check.reasons):
            check.suggested_budget = suggested_entry(usage, entry)
    check.status = "fail" if check.reasons else "pass"
    return check


def _check_hard_limits(check: TargetCheck, usage: Mapping[str, Any]) -> None:
    spills = {f: int(usage[f]) for f in SPILL_FIELDS if usage.get(f)}
    if spills:
        check.reasons.append("spills/scratch must be 0: " + ", ".join(f"{k}={v}" for k, v in spills.items()))
    if usage["shared_bytes"] > usage["shared_limit"]:
        check.reasons.append(f"shared memory/LDS {usage['shared_bytes']} B exceeds the hardware limit {usage['shared_limit']} B")
    elif usage["occupancy"] == 0:
        check.reasons.append(f"occupancy 0: cannot launch ({usage.get('occupancy_limited_by')})")


def _check_budget(check: TargetCheck, usage: Mapping[str, Any], entry: Mapping[str, int] | None) -> None:
    if entry is None:
        check.reasons.append(f"no budget entry in {BUDGET_PATH}")
        return
    for key, (name, kind) in BUDGET_LIMITS.items():
        if key not in entry or usage.get(name) is None:
            continue
        value, limit = usage[name], entry[key]
        if (kind == "max" and value > limit) or (kind == "min" and value < limit):
            check.reasons.append(f"{name} {value} {'>' if kind == 'max' else '<'} budget {key} {limit}")


def _check_vs_base(check, usage, base_usage, tolerance: int, edited_here: bool) -> None:
    for name, label in HEADROOM_FIELDS:
        if usage.get(name) is None or base_usage.get(name) is None:
            continue
        growth = usage[name] - base_usage[name]
        if growth > tolerance:
            message = f"{label} shrank by {growth} vs base ({name} {base_usage[name]} -> {usage[name]}, tolerance {tolerance})"
            if edited_here:
                check.notes.append(message + "; accepted: this change edits the target's budget entry")
            else:
                check.reasons.append(message)


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
                "spills": spills,
                "budget_regs": "-" if not c.budget else str(c.budget.get("max_registers", "-")),
                "why": "; ".join(_clip(text, 200) for text in c.reasons + c.notes),
            }
        )
    return rows


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."


def suggested_edits(checks: Iterable[TargetCheck]) -> dict[str, dict[str, int]]:
    return {c.target: c.suggested_budget for c in checks if c.status == "fail" and c.suggested_budget}


def render_suggestion(edits: Mapping[str, Mapping[str, int]]) -> str:
    if not edits:
        return ""
    body = ",\n".join(f"    {json.dumps(t)}: {json.dumps(e)}" for t, e in sorted(edits.items()))
    return (
        f"To accept these numbers on purpose, edit {BUDGET_PATH} -- under \"targets\", set:\n{body}\n"
        "(spills, scratch, LDS over the hardware limit and compile failures cannot be accepted by a budget edit)"
    )


def markdown_summary(verdict: str, base_note: str, rows, suggestion: str) -> str:
    parts = [f"### Register budget gate: {verdict.upper()}", "", base_note, "", markdown_table(rows)]
    if suggestion:
        parts += ["", "```", suggestion, "```"]
    return "\n".join(parts)


# ---------------------------------------------------------------------------
# command line
# ---------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m ci.budget_gate",
        description=__doc__.split("\n\n", 1)[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--base", metavar="REF", help="compare with the merge-base of HEAD and REF (default: origin/main, else main)")
    parser.add_argument("--head", metavar="REF", default="HEAD", help="the commit to check (default: HEAD)")
    parser.add_argument("--working-tree", action="store_true", help="check the current files (uncommitted edits too) instead of a commit; the base may then be HEAD itself")
    parser.add_argument("--budget", metavar="PATH", help=f"budget file to use (default: {BUDGET_PATH} of the head)")
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
        from ci.gitutil import GitError

        kind = "error" if isinstance(exc, (HarnessError, GitError)) else f"internal error ({type(exc).__name__})"
        print(f"budget_gate: {kind}: {exc}", file=sys.stderr)
        return 2


def _run(args) -> int:
    from contextlib import nullcontext

    from ci import gitutil

    repo = gitutil.open_repo(args.repo)
    head_sha = gitutil.resolve_commit(repo, "HEAD" if args.working_tree else args.head)
    base = gitutil.resolve_base(repo, head_sha, args.base, head_may_be_base=args.working_tree)
    head_label = "working tree" if args.working_tree else f"head {args.head} ({head_sha[:12]})"
    print(f"budget_gate: {head_label}; {base.note}", file=sys.stderr, flush=True)

    only = {"kernel": args.kernel, "arch": args.arch, "config": args.config}
    head_tree = nullcontext(Path(repo.working_tree_dir)) if args.working_tree else gitutil.checkout(repo, head_sha)
    with head_tree as head_dir:
        budget_path = Path(args.budget) if args.budget else head_dir / BUDGET_PATH
        if not budget_path.exists():
            raise HarnessError(f"budget file {budget_path} does not exist")
        budget = parse_budget(budget_path.read_text(), str(args.budget or BUDGET_PATH))
        head = measure_tree(head_dir, "head", only)
    if head.results is None:
        raise HarnessError(f"the head has no ci/resources.py ({head.note})")

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
    verdict = "fail" if any(c.status == "fail" for c in checks) else "pass"
    rows = table_rows(checks)
    edits = suggested_edits(checks)
    suggestion = render_suggestion(edits)

    print(f"{base_note}\n")
    print(text_table(rows))
    if suggestion:
        print("\n" + suggestion)
    failed = [c.target for c in checks if c.status == "fail"]
    print(f"\nbudget_gate: {verdict.upper()}" + (f": {len(failed)} target(s) failed: {', '.join(failed)}" if failed else
                                               f": {len(checks)} target(s) checked"))
    append_step_summary(markdown_summary(verdict, base_note, rows, suggestion))
    if args.json:
        write_json_atomic(
            args.json,
            {
                "schema": GATE_SCHEMA,
                "verdict": verdict,
                "base": {"ref": base.ref, "sha": base.sha, "note": base_note},
                "head": {"ref": args.head, "sha": head_sha, "working_tree": bool(args.working_tree)},
                "targets": [asdict(c) for c in checks],
                "suggested_budget": edits,
            },
        )
    return 1 if verdict == "fail" else 0


def _base_budget(repo, sha: str) -> Budget | None:
    """The base's budget (to see which entries this change edits); None when absent or unreadable there."""
    from ci import gitutil

    text = gitutil.read_file(repo, sha, BUDGET_PATH)
    if text is None:
        return None
    try:
        return parse_budget(text, f"{BUDGET_PATH} at base")
    except HarnessError as exc:
        print(f"budget_gate: note: ignoring the base's budget ({exc})", file=sys.stderr)
        return None


if __name__ == "__main__":
    sys.exit(main())
