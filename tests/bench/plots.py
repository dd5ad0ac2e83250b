"""The report's pictures (matplotlib, Agg: no display needed). Each function writes one PNG and
returns its path. Our strategies are drawn in solid colours, kafka-python's peers hatched or
dashed, in the same order everywhere."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from spark_lag_assign.core import quality

COLOURS = {
    "range": "#1f77b4",
    "roundrobin": "#ff7f0e",
    "lag": "#2ca02c",
    "shuffle": "#9467bd",
    "sticky": "#8c564b",
    "lag-sticky": "#d62728",
    "kp-range": "#1f77b4",
    "kp-roundrobin": "#ff7f0e",
    "kp-sticky": "#8c564b",
}


def _peer(name: str) -> bool:
    return name.startswith("kp-")


def _save(fig: plt.Figure, path: Path) -> Path:
    fig.savefig(path, dpi=110, bbox_inches="tight")
    plt.close(fig)
    return path


def lag_bars(plans: Mapping[str, pd.DataFrame], subs: Mapping[str, Sequence[str]], title: str, path: Path) -> Path:
    """Per-consumer lag of each planner's plan on one workload, consumers in id order (hosts together)."""
    names = list(plans)
    cols = 3
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(13, 3.0 * rows), sharey=True, squeeze=False)
    consumers = sorted(subs)
    total = None
    bound = quality.quality(plans[names[0]], subs).lower_bound / 1e6
    # one runaway consumer (lag's) would flatten every other panel: cut at 2.5 x LB and print its value
    top = 2.5 * bound
    for ax, name in zip(axes.flat, names):
        table = quality.per_consumer(plans[name], consumers)
        q = quality.quality(plans[name], subs)
        total = q.total_lag
        values = table["lag"].to_numpy() / 1e6
        x = np.arange(len(values))
        ax.bar(
            x,
            np.minimum(values, top),
            color=COLOURS.get(name, "grey"),
            hatch="//" if _peer(name) else None,
            edgecolor="white" if not _peer(name) else "black",
            linewidth=0.4,
        )
        for i in np.flatnonzero(values > top):
            ax.text(
                x[i],
                top * 0.97,
                f"{values[i]:.0f}",
                ha="center",
                va="top",
                fontsize=7,
                rotation=90,
                color="white",
                fontweight="bold",
            )
        ax.set_ylim(0, top)
        ax.axhline(q.lower_bound / 1e6, color="black", linestyle="--", linewidth=1)
        ax.set_title(
            f"{name}: max/LB {q.optimality:.2f}, counts {table['partitions'].min()}-{table['partitions'].max()}", fontsize=10
        )
        ax.set_xticks(np.arange(len(values)))
        ax.set_xticklabels([c.split("-")[0] for c in consumers], rotation=90, fontsize=6)
    for ax in axes.flat[len(names) :]:
        ax.set_visible(False)
    for ax in axes[:, 0]:
        ax.set_ylabel("lag (million msgs)")
    fig.suptitle(f"{title}: lag per consumer (dashed: LB = max(mean, largest partition); total {total:,})", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def optimality(static: pd.DataFrame, names: Sequence[str], path: Path, targets: Mapping[str, float]) -> Path:
    """Distribution of max consumer lag / LB over seeds, one panel per workload shape."""
    ran = static[static["optimality"].notna()]
    shapes = list(dict.fromkeys(ran["shape"]))
    cols = 2
    rows = (len(shapes) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(12, 3.6 * rows), squeeze=False)
    for ax, shape in zip(axes.flat, shapes):
        here = ran[ran["shape"] == shape]
        high = 1.0
        # one row per planner in every panel, a planner that did not run leaves its row empty
        for y, name in enumerate(names):
            values = here.loc[here["planner"] == name, "optimality"].to_numpy()
            if not len(values):
                ax.text(1.0, y, "  not run", va="center", fontsize=7, color="grey")
                continue
            high = max(high, float(values.max()))
            box = ax.boxplot(
                [values],
                positions=[y],
                vert=False,
                widths=0.6,
                patch_artist=True,
                showfliers=False,
                medianprops={"color": "black"},
            )
            patch = box["boxes"][0]
            patch.set_facecolor(COLOURS.get(name, "grey"))
            patch.set_alpha(0.45 if _peer(name) else 0.85)
            if _peer(name):
                patch.set_hatch("//")
            ax.scatter(values, np.full(len(values), y), s=7, color="black", alpha=0.6, zorder=3)
        ax.set_yticks(np.arange(len(names)))
        ax.set_yticklabels(names, fontsize=8)
        ax.set_ylim(len(names) - 0.5, -0.5)
        ax.set_xscale("log")
        ax.set_xlim(0.98, high * 1.25)
        # a log axis spanning 1 to 50 cannot label 1.05 apart from 1: pick the ticks by the span
        if high < 1.3:
            ticks = [1, 1.05, 1.1, 1.15, 1.2, 1.25]
        elif high < 2.5:
            ticks = [1, 1.05, 1.15, 1.3, 1.5, 2]
        else:
            ticks = [1, 1.15, 1.5, 2, 3, 5, 10, 20, 50]
        kept = [t for t in ticks if t <= high * 1.25]
        ax.set_xticks(kept)
        ax.set_xticklabels([f"{t:g}" for t in kept], fontsize=8)
        ax.minorticks_off()
        ax.axvline(1.0, color="black", linewidth=0.8)
        if shape in targets:
            ax.axvline(targets[shape], color="red", linestyle=":", linewidth=1.4, label=f"target: median <= {targets[shape]}")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_title(shape, fontsize=10)
        ax.grid(True, axis="x", alpha=0.3)
    for ax in axes.flat[len(shapes) :]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("max consumer lag / LB (log scale; 1 = perfect)")
    fig.suptitle(f"Optimality of plans from scratch over {ran['seed'].nunique()} seeds (box: quartiles, dots: seeds)")
    fig.tight_layout()
    return _save(fig, path)


def moves(churn: pd.DataFrame, names: Sequence[str], steps: Sequence[str], path: Path) -> Path:
    """Partitions moved at each churn step: median over seeds, whisker to the worst seed."""
    moved = churn[churn["step"] != steps[0]]
    shapes = list(dict.fromkeys(moved["shape"]))
    fig, axes = plt.subplots(len(shapes), 1, figsize=(13, 3.3 * len(shapes)), squeeze=False)
    later = list(steps[1:])
    for ax, shape in zip(axes.flat, shapes):
        here = moved[moved["shape"] == shape]
        present = [n for n in names if (here["planner"] == n).any()]
        width = 0.85 / len(present)
        for i, name in enumerate(present):
            g = here[here["planner"] == name].groupby("step")["moved"]
            med = g.median().reindex(later).to_numpy()
            worst = g.max().reindex(later).to_numpy()
            x = np.arange(len(later)) + (i - (len(present) - 1) / 2) * width
            ax.bar(
                x,
                med,
                width,
                color=COLOURS.get(name, "grey"),
                label=name,
                hatch="//" if _peer(name) else None,
                alpha=0.55 if _peer(name) else 0.9,
                edgecolor="black" if _peer(name) else "white",
                linewidth=0.4,
            )
            ax.errorbar(x, med, yerr=[np.zeros_like(med), worst - med], fmt="none", ecolor="black", elinewidth=0.6, capsize=1.5)
        fewest = here.groupby("step")["fewest"].median().reindex(later)
        if fewest.notna().any():
            for j, value in enumerate(fewest.to_numpy()):
                if np.isfinite(value):
                    ax.hlines(
                        value,
                        j - 0.47,
                        j + 0.47,
                        colors="black",
                        linestyles="--",
                        linewidth=1.4,
                        label="fewest moves for count balance" if j == 0 else None,
                    )
        ax.set_xticks(np.arange(len(later)))
        ax.set_xticklabels(later)
        ax.set_ylabel("partitions moved")
        partitions = int(here["partitions"].median())
        ax.set_title(f"{shape} (~{partitions:,} partitions)", fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    handles: dict[str, object] = {}
    for ax in axes.flat:
        for h, label in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(label, h)
    fig.suptitle(
        "Partitions moved at each churn step: median over seeds, whisker to the worst seed (kafka-python hatched)", fontsize=11
    )
    fig.tight_layout(rect=(0, 0, 1, 0.95))
    fig.legend(
        list(handles.values()), list(handles), loc="upper center", ncol=10, fontsize=8, bbox_to_anchor=(0.5, 0.965), frameon=False
    )
    return _save(fig, path)


def drain_curves(curves: Mapping[str, Mapping[str, object]], title: str, path: Path) -> Path:
    """The group's total lag over time under each planner's plan, one panel per scenario."""
    fig, axes = plt.subplots(1, len(curves), figsize=(13, 4.6), squeeze=False)
    for ax, (scenario, c) in zip(axes.flat, curves.items()):
        times = np.asarray(c["times"]) / 60
        drains: Mapping[str, float] = c["drains"]  # type: ignore[assignment]
        for name, lag in c["lag"].items():  # type: ignore[union-attr]
            t = drains[name]
            label = f"{name} ({t / 60:.0f} min)" if np.isfinite(t) else f"{name} (never)"
            ax.plot(
                times,
                np.asarray(lag) / 1e6,
                color=COLOURS.get(name, "grey"),
                linestyle="--" if _peer(name) else "-",
                linewidth=2.2 if name == "lag-sticky" else 1.3,
                label=label,
            )
        bound = float(c["bound"])  # type: ignore[arg-type]
        if np.isfinite(bound):
            ax.axvline(bound / 60, color="black", linestyle=":", linewidth=1, label=f"no plan faster ({bound / 60:.0f} min)")
        ax.set_xlabel("minutes")
        ax.set_ylabel("total lag (million msgs)")
        ax.set_ylim(bottom=0)
        # the slowest plan would squeeze the others into the left edge: cut at 3x the bound, the legend has its time
        right = min(times[-1], 3 * bound / 60) if np.isfinite(bound) and bound > 0 else times[-1]
        ax.set_xlim(0, right)
        if right < times[-1]:
            ax.annotate("x axis cut at 3x the bound", (0.99, 0.5), xycoords="axes fraction", ha="right", fontsize=7, color="grey")
        ax.set_title("producers stopped" if scenario == "backlog" else "producers appending 40% of the group's rate", fontsize=10)
        ax.legend(fontsize=7, title="time to drain", title_fontsize=7)
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


def scale_times(scale: pd.DataFrame, names: Sequence[str], path: Path, limit: float | None = None) -> Path:
    """Seconds per plan against partitions, one panel per consumer count (log-log); runs stopped at the
    time limit are drawn as triangles on the limit."""
    counts = sorted(scale["consumers"].unique())
    fig, axes = plt.subplots(1, len(counts), figsize=(4.6 * len(counts), 4.2), sharey=True, squeeze=False)
    for ax, c in zip(axes.flat, counts):
        here = scale[scale["consumers"] == c]
        for name in names:
            g = here[(here["planner"] == name) & (here["status"] == "ok")].sort_values("partitions")
            style = {"color": COLOURS.get(name, "grey"), "label": name}
            if _peer(name):
                style.update(linestyle="--", marker="s", markerfacecolor="white")
            else:
                style.update(linestyle="-", marker="o")
            if len(g):
                ax.plot(g["partitions"], g["seconds"], **style)
            stopped = here[(here["planner"] == name) & here["status"].str.startswith("stopped")]
            if limit is not None and len(stopped):
                ax.scatter(
                    stopped["partitions"],
                    [limit] * len(stopped),
                    marker="^",
                    s=60,
                    color=COLOURS.get(name, "grey"),
                    edgecolors="black",
                    zorder=4,
                )
                smallest = scale["partitions"].min()
                for n in stopped["partitions"]:
                    # at the left edge the label would spill into the neighbouring panel
                    left = n == smallest
                    ax.annotate(
                        f"{name} stopped",
                        (n, limit),
                        textcoords="offset points",
                        xytext=(8 if left else -8, -4),
                        fontsize=7,
                        ha="left" if left else "right",
                        va="top",
                    )
        if limit is not None:
            ax.axhline(limit, color="grey", linestyle=":", linewidth=1)
            ax.annotate(
                f"limit {limit:.0f} s",
                (0.01, limit),
                xycoords=("axes fraction", "data"),
                textcoords="offset points",
                xytext=(0, 3),
                fontsize=7,
                color="grey",
            )
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{c:,} consumers")
        ax.set_xlabel("partitions")
        ax.grid(True, which="major", alpha=0.3)
    axes.flat[0].set_ylabel("seconds per plan (log)")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=9, fontsize=8, bbox_to_anchor=(0.5, 0.95), frameon=False)
    fig.suptitle(
        "Time to plan from scratch (one run per point; kafka-python dashed, hollow; triangle: stopped at the limit)", fontsize=11
    )
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return _save(fig, path)


__all__ = ["drain_curves", "lag_bars", "moves", "optimality", "scale_times"]
