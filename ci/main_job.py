"""The main job: benchmark the recent history of main with asv, publish the HTML, say where it is.

    python -m ci.main_job                      # last 3 commits of main, then asv publish
    python -m ci.main_job --commits 5 --repeat-head 1 --bench triton_dot_scaled

Steps (progress on stderr, asv's own "[ 42%]" lines included):

1. Fingerprint this machine in a child process (the job itself never touches the
   GPU): GPU model, driver, CUDA/ROCm, torch/triton/flydsl versions, which
   registered kernels can run here and why the others cannot. It becomes the asv
   machine name (``<host>-<gpu>``) and machine info (``asv machine``).
2. ``asv run`` over the last ``--commits`` first-parent commits of ``--branch``.
   On a CPU-only machine that records the resource history and the CPU timings
   of the torch reference (GPU shapes are n/a); on a GPU also TFLOPS and time.
3. ``--repeat-head N``: run HEAD N more times; the spread of the same commit.
4. ``asv publish``; prints the path of the HTML (``asv preview`` serves it).

Output: a Markdown summary (TFLOPS per commit, resources per commit, spread,
failures) on stdout and into $GITHUB_STEP_SUMMARY; ``--json PATH`` for machines.
Exit: 0 recorded, 1 a benchmark of the newest commit failed or has no result (a
missing result is a failure; older commits' failures are listed, they are history),
2 the harness failed (asv could not run, no results).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from harness.report import append_step_summary, markdown_table as render_markdown_table, write_json_atomic

REPO_ROOT = Path(__file__).resolve().parents[1]
# What `asv continuous` gates on: every benchmark except the higher-is-better readings
# (asv takes lower as better: a TFLOPS gain would fail the gate, a loss would pass it).
GATE_BENCHMARKS = r"^(?!.*\.(track_tflops|track_occupancy)\b)"
TFLOPS_KEY = re.compile(r"^bench_gemm\.(\w+)\.track_tflops$")
TIME_KEY = re.compile(r"^bench_gemm\.(\w+)\.track_time$")
RESOURCE_KEY = re.compile(r"^bench_resources\.CompiledResources\.track_(\w+)$")


def log(message: str) -> None:
    print(f"main_job: {message}", file=sys.stderr, flush=True)


class HarnessError(RuntimeError):
    """The job could not do its work (not a benchmark result); exit 2."""


# ---------------------------------------------------------------------------
# fingerprint (runs in a child process: see fingerprint_in_child)
# ---------------------------------------------------------------------------


def fingerprint() -> dict[str, Any]:
    """This machine and its software stack. Touches the GPU; call it in a child process."""
    import torch

    info: dict[str, Any] = {
        "host": socket.gethostname(),
        "os": f"{platform.system()} {platform.release()}",
        "arch": platform.machine(),
        "cpu": _cpu_model(),
        "num_cpu": os.cpu_count() or 0,
        "ram": _ram(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": _version_of("triton"),
        "flydsl": _version_of("flydsl"),
        "gpu": "none",
        "gpu_arch": "cpu",
        "gpu_driver": "none",
        "gpu_runtime": "none",
    }
    device = "cpu"
    if torch.cuda.is_available():
        from kernels import devices

        device = "cuda"
        info["gpu"] = f"{torch.cuda.get_device_name(0)} x{torch.cuda.device_count()}"
        info["gpu_arch"] = devices.device_arch(device)
        hip = getattr(torch.version, "hip", None)
        info["gpu_runtime"] = f"ROCm {hip}" if hip else f"CUDA {torch.version.cuda}"
        info["gpu_driver"] = _gpu_driver(bool(hip))
    info["kernels"] = _kernel_availability(device)
    from harness import gpu_state

    info["idle_override"] = gpu_state.override_requested()
    return info


def _version_of(module: str) -> str:
    try:
        from importlib.metadata import version

        return version(module)
    except Exception:
        return "none"


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _ram() -> str:
    try:
        with open("/proc/meminfo") as f:
            kib = int(f.readline().split()[1])
        return f"{round(kib / 2**20)} GiB"
    except (OSError, ValueError, IndexError):
        return "unknown"


def _gpu_driver(rocm: bool) -> str:
    try:
        if rocm:
            import amdsmi  # written against amdsmi's documented API; NOT YET RUN ON AN MI355X

            amdsmi.amdsmi_init()
            try:
                return str(
                    amdsmi.amdsmi_get_gpu_driver_info(amdsmi.amdsmi_get_processor_handles()[0])["driver_version"]
                )
            finally:
                amdsmi.amdsmi_shut_down()
        import pynvml

        pynvml.nvmlInit()
        try:
            driver = pynvml.nvmlSystemGetDriverVersion()
            return driver.decode() if isinstance(driver, bytes) else str(driver)
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # the fingerprint says what it could not read rather than failing the job
        return f"unknown ({type(exc).__name__})"


def _kernel_availability(device: str) -> dict[str, str]:
    """Kernel name -> "runs" or why not, on this machine (the working tree's registry)."""
    try:
        from kernels import registry

        return {k.name: k.unavailable_reason(device) or "runs" for k in registry.all_kernels()}
    except Exception as exc:
        return {"(registry)": f"could not load: {type(exc).__name__}: {exc}"}


def fingerprint_in_child(python: str, env: dict[str, str]) -> dict[str, Any]:
    code = "import json, ci.main_job as m; print(json.dumps(m.fingerprint()))"
    proc = subprocess.run([python, "-c", code], cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"fingerprinting this machine failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def machine_name(info: dict[str, Any]) -> str:
    gpu = info["gpu"].split(" x")[0] if info["gpu"] != "none" else "cpu"
    slug = re.sub(r"[^a-z0-9]+", "-", f"{info['host']}-{gpu}".lower()).strip("-")
    return slug


def machine_fields(info: dict[str, Any]) -> dict[str, str]:
    """asv's machine fields plus the GPU and the stack; all of them land in every result's params."""
    return {
        "os": info["os"],
        "arch": info["arch"],
        "cpu": info["cpu"],
        "num_cpu": str(info["num_cpu"]),
        "ram": info["ram"],
        "gpu": info["gpu"],
        "gpu_driver": info["gpu_driver"],
        "gpu_runtime": info["gpu_runtime"],
        "torch": info["torch"],
        "triton": info["triton"],
        "flydsl": info["flydsl"],
        # Results taken with the idle check overridden must never pass for clean ones.
        "idle_check": "OVERRIDDEN" if info.get("idle_override") else "enforced",
    }


def record_machine(name: str, fields: dict[str, str], asv: list[str], env: dict[str, str]) -> None:
    """``asv machine --yes`` with the standard fields, then the GPU/stack fields into the same entry."""
    standard = ("os", "arch", "cpu", "num_cpu", "ram")
    args = [f"--{k}={fields[k]}" for k in standard]
    _run_checked([*asv, "machine", "--yes", f"--machine={name}", *args], env)
    from asv.machine import MachineCollection

    entry = MachineCollection.load(name)
    entry.update(fields)
    MachineCollection.save(name, entry)


# ---------------------------------------------------------------------------
# running asv
# ---------------------------------------------------------------------------


def _run_checked(cmd: list[str], env: dict[str, str]) -> None:
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise HarnessError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def run_streaming(cmd: list[str], env: dict[str, str]) -> int:
    """Run ``cmd``, echoing its output live to stderr (asv's own progress lines)."""
    log("$ " + " ".join(cmd))
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        sys.stderr.write(line)
        sys.stderr.flush()
    return proc.wait()


def recent_commits(branch: str, count: int) -> list[str]:
    """The last ``count`` first-parent commits of ``branch``, newest first."""
    proc = subprocess.run(
        ["git", "rev-list", "--first-parent", f"--max-count={count}", branch],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        raise HarnessError(f"git rev-list {branch}: {proc.stderr.strip()}")
    commits = proc.stdout.split()
    if not commits:
        raise HarnessError(f"branch {branch} has no commits")
    return commits


def asv_environment(args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    # asv_bench/link_stack.py links this interpreter's site-packages into asv's environments.
    env["MXFP4_STACK_PYTHON"] = sys.executable
    # Triton's CPU interpreter would turn GPU benchmarks into hour-long CPU runs.
    env.pop("TRITON_INTERPRET", None)
    if args.wheelhouse:
        # Offline machines: asv's environment gets its few requirements (asv_runner, build, ...) from here.
        env["PIP_FIND_LINKS"] = str(Path(args.wheelhouse).resolve())
        env["PIP_NO_INDEX"] = "1"
    return env


# ---------------------------------------------------------------------------
# reading asv's results
# ---------------------------------------------------------------------------


@dataclass
class Table:
    """rows x columns of numbers (None: failed, nan: n/a)."""

    columns: list[str]
    rows: dict[str, dict[str, float | None]] = field(default_factory=dict)


def load_results(results_dir: Path, machine: str) -> dict[str, dict[str, dict[str, float | None]]]:
    """commit -> "benchmark(params)" -> value, for ``machine``."""
    from asv.results import iter_results_for_machine

    by_commit: dict[str, dict[str, float | None]] = {}
    for results in iter_results_for_machine(str(results_dir), machine):
        values = by_commit.setdefault(results.commit_hash, {})
        for key in results.get_all_result_keys():
            params = results.get_result_params(key)
            combos = _param_combinations(params)
            for combo, value in zip(combos, results.get_result_value(key, params)):
                values[f"{key}({', '.join(combo)})" if combo else key] = value
    return by_commit


def _param_combinations(params: list[list[str]]) -> list[tuple[str, ...]]:
    import itertools

    stripped = [[p.strip("'") for p in values] for values in params]
    return list(itertools.product(*stripped)) if stripped else [()]


def pick(values: dict[str, float | None], pattern: re.Pattern[str]) -> dict[str, float | None]:
    """Entries whose benchmark name matches ``pattern``, keyed "Class or metric (params)"."""
    picked = {}
    for name, value in values.items():
        key, _, rest = name.partition("(")
        match = pattern.match(key)
        if match:
            picked[f"{match.group(1)}({rest}" if rest else match.group(1)] = value
    return picked


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def history_table(by_commit: dict, commits: Sequence[str], pattern: re.Pattern[str]) -> Table:
    """Rows with at least one number, columns = ``commits`` (oldest first)."""
    table = Table([c[:8] for c in commits])
    for commit in commits:
        for row, value in pick(by_commit.get(commit, {}), pattern).items():
            table.rows.setdefault(row, {})[commit[:8]] = value
    table.rows = {r: v for r, v in sorted(table.rows.items()) if any(is_number(x) for x in v.values())}
    return table


def _in_milliseconds(by_commit: dict) -> dict:
    return {
        commit: {name: (v * 1e3 if is_number(v) else v) for name, v in values.items()}
        for commit, values in by_commit.items()
    }


def failures(by_commit: dict, commits: Sequence[str]) -> list[str]:
    """Failed benchmarks (asv records None), and commits with no results at all (e.g. the build failed)."""
    failed = [
        f"{c[:8]} (no results: the build or install failed, see asv's output)" for c in commits if not by_commit.get(c)
    ]
    return failed + sorted(
        f"{commit[:8]} {name}"
        for commit in commits
        for name, value in by_commit.get(commit, {}).items()
        if value is None
    )


def spread(runs: list[dict[str, float | None]], pattern: re.Pattern[str]) -> Table:
    """The same commit measured ``len(runs)`` times: every value, and (max - min) / median."""
    table = Table([f"run {i + 1}" for i in range(len(runs))] + ["spread"])
    names = sorted({n for run in runs for n in pick(run, pattern)})
    for name in names:
        values = [pick(run, pattern).get(name) for run in runs]
        numbers = sorted(v for v in values if is_number(v))
        if len(numbers) < 2:
            continue
        row = {f"run {i + 1}": v for i, v in enumerate(values)}
        median = statistics.median(numbers)
        row["spread"] = (numbers[-1] - numbers[0]) / median if median else float("nan")
        table.rows[name] = row
    return table


# ---------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------


def _cell(value: Any, percent: bool = False) -> str:
    if value is None:
        return "failed"
    if not is_number(value):
        return "n/a"
    if percent:
        return f"{value * 100:.1f}%"
    return f"{value:.4g}"


def markdown_table(title: str, table: Table, percent_columns: Sequence[str] = ()) -> str:
    rows = [
        {"benchmark": row, **{c: _cell(values.get(c), c in percent_columns) if c in values else "" for c in table.columns}}
        for row, values in table.rows.items()
    ]
    return f"### {title}\n\n" + render_markdown_table(rows, empty="(no values)") + "\n"


def summary_markdown(report: dict[str, Any], tables: dict[str, Table]) -> str:
    fp = report["fingerprint"]
    parts = [
        f"## asv main job: {report['machine']}",
        "",
        f"GPU: {fp['gpu']} ({fp['gpu_arch']}), driver {fp['gpu_driver']}, {fp['gpu_runtime']}; "
        f"torch {fp['torch']}, triton {fp['triton']}, flydsl {fp['flydsl']}; {fp['cpu']} x{fp['num_cpu']}.",
        "",
        "Kernels here: " + "; ".join(f"`{k}`: {v}" for k, v in fp["kernels"].items()),
        "",
        f"Commits (oldest first): {', '.join(c[:8] for c in report['commits'])}. HTML: `{report['html']}`",
        "",
        markdown_table("TFLOPS per commit (median; for reading)", tables["tflops"]),
        markdown_table("Milliseconds per GEMM per commit (median; the gated metric)", tables["time"]),
        markdown_table("Compiled resources per commit", tables["resources"]),
    ]
    if "spread" in tables:
        parts.append(
            markdown_table("Same commit, repeated: spread = (max - min) / median", tables["spread"], ["spread"])
        )
    if report["failures"]:
        parts += [
            "### Failed benchmarks (a missing result is a failure)",
            "",
            *[f"- {f}" for f in report["failures"]],
            "",
        ]
    return "\n".join(parts)


def make_html_offline(html: Path) -> bool:
    """Point the published page at local copies of its JavaScript libraries (asv_bench.offline_html)."""
    from asv_bench import offline_html

    try:
        replaced = offline_html.localize(html, offline_html.ensure_assets())
    except offline_html.AssetsUnavailable as exc:
        log(f"warning: the HTML loads jQuery/flot from public CDNs and shows no graph offline: {exc}")
        return False
    log(f"the HTML loads its {len(replaced)} libraries from {html / 'vendor'} (works offline)")
    return True


# ---------------------------------------------------------------------------
# main
# ---------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ci.main_job", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--commits", type=int, default=3, help="how many recent first-parent commits of the branch (default 3)"
    )
    parser.add_argument("--branch", default="main", help="branch whose history is benchmarked (default main)")
    parser.add_argument(
        "--bench", action="append", default=[], help="asv -b regex (repeatable); default: the whole suite"
    )
    parser.add_argument(
        "--repeat-head", type=int, default=0, metavar="N", help="run the newest commit N more times: spread"
    )
    parser.add_argument("--machine", help="asv machine name (default <host>-<gpu model>)")
    parser.add_argument(
        "--launch-method",
        choices=("auto", "spawn", "forkserver"),
        default="auto",
        help="asv's benchmark processes: spawn (a fresh interpreter each) or forkserver (fork from one that has "
        "imported the suite). auto: spawn with a GPU, forkserver without (saves ~5 s of imports per benchmark)",
    )
    parser.add_argument("--wheelhouse", help="directory of wheels for asv's environments (offline machines)")
    parser.add_argument("--show-stderr", action="store_true", help="print every benchmark's output (timing summaries)")
    parser.add_argument("--no-publish", action="store_true", help="skip asv publish")
    parser.add_argument("--json", type=Path, help="write the report as JSON here")
    args = parser.parse_args(argv)
    if args.commits < 1:
        parser.error(f"--commits must be >= 1, got {args.commits}")
    if args.repeat_head < 0:
        parser.error(f"--repeat-head must be >= 0, got {args.repeat_head}")
    return args


def asv_config() -> dict[str, Any]:
    import asv.util

    return asv.util.load_json(str(REPO_ROOT / "asv.conf.json"), js_comments=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.monotonic()
    try:
        return _main(args, started)
    except HarnessError as exc:
        log(f"error: {exc}")
        return 2


def _main(args: argparse.Namespace, started: float) -> int:
    asv = [sys.executable, "-m", "asv"]
    env = asv_environment(args)
    conf = asv_config()
    results_dir = REPO_ROOT / conf["results_dir"]

    log("[1/4] fingerprinting this machine (in a child process)")
    info = fingerprint_in_child(sys.executable, env)
    machine = args.machine or machine_name(info)
    record_machine(machine, machine_fields(info), asv, env)
    log(f"machine {machine}: {info['gpu']} ({info['gpu_arch']}), {info['gpu_runtime']}, driver {info['gpu_driver']}")
    for kernel, status in info["kernels"].items():
        log(f"  {kernel}: {status}")

    launch = args.launch_method
    if launch == "auto":
        launch = "spawn" if info["gpu"] != "none" else "forkserver"
    commits = recent_commits(args.branch, args.commits)
    # --record-samples: keep every timing sample, so `asv compare` can apply its Mann-Whitney test.
    common = [
        f"--machine={machine}",
        f"--launch-method={launch}",
        "--record-samples",
        *[f"--bench={b}" for b in args.bench],
    ]
    if args.show_stderr:
        common.append("--show-stderr")

    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as hashfile:
        hashfile.write("\n".join(commits) + "\n")
    try:
        log(f"[2/4] asv run over {len(commits)} commits of {args.branch} ({launch}); asv prints its own progress")
        codes = [run_streaming([*asv, "run", f"HASHFILE:{hashfile.name}", *common], env)]
    finally:
        os.unlink(hashfile.name)

    head = commits[0]
    head_runs = [load_results(results_dir, machine).get(head, {})]
    for i in range(args.repeat_head):
        log(f"[3/4] repeat {i + 1}/{args.repeat_head} of {head[:8]} (same commit, for the spread)")
        codes.append(run_streaming([*asv, "run", f"{head}^!", *common], env))
        head_runs.append(load_results(results_dir, machine).get(head, {}))

    html = REPO_ROOT / conf["html_dir"]
    html_offline = False
    if not args.no_publish:
        log("[4/4] asv publish")
        if run_streaming([*asv, "publish"], env) != 0:
            raise HarnessError("asv publish failed")
        html_offline = make_html_offline(html)

    by_commit = load_results(results_dir, machine)
    if not any(by_commit.get(c) for c in commits):
        raise HarnessError(f"asv recorded no results for machine {machine} (asv exit codes {codes})")
    oldest_first = list(reversed(commits))
    tables = {
        "tflops": history_table(by_commit, oldest_first, TFLOPS_KEY),
        "time": history_table(_in_milliseconds(by_commit), oldest_first, TIME_KEY),
        "resources": history_table(by_commit, oldest_first, RESOURCE_KEY),
    }
    if args.repeat_head:
        tables["spread"] = spread(head_runs, re.compile(r"^(bench_gemm\.\w+\.track_\w+)$"))
    report = {
        "machine": machine,
        "fingerprint": info,
        "commits": oldest_first,
        "html": str(html / "index.html"),
        "html_offline": html_offline,
        "asv_exit_codes": codes,
        "failures": failures(by_commit, commits),
        "tables": {name: {"columns": t.columns, "rows": t.rows} for name, t in tables.items()},
        "seconds": round(time.monotonic() - started, 1),
    }
    markdown = summary_markdown(report, tables)
    print(markdown)
    append_step_summary(markdown)
    if args.json:
        write_json_atomic(args.json, report)
    log(
        f"done in {report['seconds']:.0f} s. HTML: {html / 'index.html'} -- serve it with: asv preview (from {REPO_ROOT})"
    )
    # The job fails for the newest commit's failures: older commits' are history, listed above.
    head_failures = [f for f in report["failures"] if f.startswith(head[:8])]
    if head_failures:
        log(f"{len(head_failures)} benchmarks failed at {head[:8]}, the newest commit (asv exit codes {codes})")
        return 1
    if report["failures"]:
        log(f"{len(report['failures'])} failed results in older commits (listed in the summary); none at {head[:8]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
