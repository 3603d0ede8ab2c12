"""The speed gate's PNG: per benchmark, the per-round ratios head/base, the interval, the band, the verdict.

Drawn with matplotlib's Agg canvas directly (no pyplot, no global backend state),
from the same :class:`harness.paired.Decision` objects the verdict and the JSON come from.
"""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from ci.common.files import write_bytes_atomic
from harness.paired.rounds import Round
from harness.paired.sequential import Decision
from harness.paired.verdict import Verdict
from harness.report import check_writable

VERDICT_COLOURS = {
    Verdict.REGRESSION: "#c0392b",
    Verdict.IMPROVEMENT: "#1e8449",
    Verdict.NO_CHANGE: "#2e86c1",
    Verdict.NOT_REGRESSION: "#5d6d7e",
    Verdict.INCONCLUSIVE: "#b9770e",
}


def _draw(ax, name: str, rounds: Sequence[Round], decision: Decision) -> None:
    t = decision.threshold
    est = decision.estimate
    colour = VERDICT_COLOURS[decision.verdict]
    used_x, used_y, later_x, later_y, excl = [], [], [], [], []
    for i, rnd in enumerate(rounds, start=1):
        if rnd.excluded is not None:
            excl.append((i, rnd.ratio))
        elif i <= decision.rounds_seen:
            used_x.append(i)
            used_y.append(rnd.ratio)
        else:  # after the look that decided: recorded, not used
            later_x.append(i)
            later_y.append(rnd.ratio)
    # y range: the band, the interval and the rounds that count; excluded ones are pinned to the edge.
    span = [1 - t, 1 + t, *used_y, *later_y]
    if est.bounded:
        span += [est.low, est.high]
    lo, hi = min(span), max(span)
    pad = 0.15 * (hi - lo) or 0.01
    lo, hi = lo - pad, hi + pad
    ax.set_ylim(lo, hi)
    ax.axhspan(1 - t, 1 + t, color="0.88", zorder=0, label=f"threshold band ±{t:.2%}")
    ax.axhline(1.0, color="0.5", lw=0.8, zorder=1)
    if est.bounded:
        ax.axhspan(est.low, est.high, color=colour, alpha=0.22, zorder=1, label=f"{est.confidence:.2%} interval")
    if math.isfinite(est.point):
        ax.axhline(est.point, color=colour, lw=1.6, zorder=2, label=f"mean ratio {est.point:.4f} (geometric)")
    ax.plot(used_x, used_y, "o", color="black", ms=4, zorder=3, label=f"round ratio ({len(used_x)} used)")
    if later_x:
        ax.plot(later_x, later_y, "o", mfc="none", color="0.45", ms=4, zorder=3, label="after the decision (unused)")
    if excl:
        xs = [x for x, _ in excl]
        ys = [min(max(y, lo), hi) if math.isfinite(y) else hi for _, y in excl]
        ax.plot(xs, ys, "x", color="#7d3c98", ms=6, mew=1.5, zorder=3, label=f"excluded ({len(excl)} recorded)")
    if decision.complete and decision.rounds_seen < len(rounds):
        ax.axvline(decision.rounds_seen + 0.5, color=colour, ls=":", lw=1.0, zorder=1, label="decided here")
    interval = f"[{est.low:.4f}, {est.high:.4f}]" if est.bounded else "unbounded"
    ax.set_title(
        f"{name}: {decision.verdict.value.upper()}  (head/base {est.point:.4f}, interval {interval}, "
        f"{decision.rounds_used} rounds, {decision.rounds_excluded} excluded)",
        fontsize=9,
        color=colour,
        loc="left",
    )
    ax.set_ylabel("head / base TFLOPS\n(higher is better)", fontsize=8)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.tick_params(labelsize=8)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # rounds are whole: no "2.5" tick
    ax.grid(axis="y", lw=0.3)


def plot_rounds(benchmarks: Mapping[str, tuple[Sequence[Round], Decision]], path: str | os.PathLike) -> str:
    """One panel per benchmark (its rounds in time order, excluded ones included, and their decision) to a PNG at
    ``path``, written atomically; returns the path. An unwritable path raises OSError naming it, before drawing."""
    path = str(check_writable(path, "speed plot", create=True))  # --plot checked its folder before the run
    if not benchmarks:
        raise ValueError("speed plot: no benchmarks to draw")
    n = len(benchmarks)
    fig = Figure(figsize=(10, 2.4 * n + 0.4), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n, 1, squeeze=False)[:, 0]
    for ax, (name, (rounds, decision)) in zip(axes, benchmarks.items()):
        _draw(ax, name, rounds, decision)
    axes[-1].set_xlabel("round (time order)")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    write_bytes_atomic(path, buf.getvalue(), kept="the plot as it was (or none); the rounds are in the --json record")
    return path
