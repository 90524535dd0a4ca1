"""Draw the benchmarks' comparisons from their JSON results (a bench script's ``--json``) as SVG.

Each comparison of each file becomes ``<out>/<comparison id>.svg``: per group, a bar at each
contender's median with every round's value as a dot over it, and the median ratio with its range
over the rounds above the group. The SVGs are reproducible (no date, fixed ids), so a plot
changes in git only when its data does.

Usage: python bench/plot.py RESULTS.json [...] [--out docs/benchmarks]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _results import Comparison, load  # noqa: E402

COLOURS = ("#1f6fb4", "#e07b18", "#3a9a4a", "#8a5cc2")


def draw(comparison: Comparison, document: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import EngFormatter

    matplotlib.rcParams["svg.hashsalt"] = "pylog-bench"  # fixed element ids: the same data, the same file
    matplotlib.rcParams["svg.fonttype"] = "none"  # text stays text: small files, found by search
    for name, per_group in comparison.series.items():
        for group, values in zip(comparison.groups, per_group, strict=True):
            if not all(math.isfinite(v) for v in values):
                raise SystemExit(f"plot: {comparison.id}: {name}'s {group} values are not all finite numbers: {values}")
    names = list(comparison.series)
    figure, axes = plt.subplots(figsize=(max(6.0, 1.3 * len(comparison.groups) + 4.0), 3.6))
    (_lines if comparison.plot == "lines" else _bars)(axes, comparison)
    top = max(v for per_group in comparison.series.values() for values in per_group for v in values)
    for g, ratios in enumerate(comparison.ratios):
        group_top = max(v for per_group in comparison.series.values() for v in per_group[g])
        if ratios:
            text = f"{statistics.median(ratios):.2f}" + (
                f"\n({min(ratios):.2f}-{max(ratios):.2f})" if len(ratios) > 1 else ""
            )
            axes.annotate(
                text, (g, group_top), xytext=(0, 6), textcoords="offset points", ha="center", va="bottom", fontsize=8
            )
    axes.set_xticks(range(len(comparison.groups)), comparison.groups)
    axes.set_ylabel(comparison.unit)
    if comparison.x_label:
        axes.set_xlabel(comparison.x_label)
    axes.yaxis.set_major_formatter(EngFormatter(sep=""))  # 400k, 1.2M: no offset text
    if comparison.log_y:
        axes.set_yscale("log")
        low = min(v for per_group in comparison.series.values() for values in per_group for v in values)
        axes.set_ylim(low / 2, top * 4)  # room for the ratios above the highest point
    else:
        axes.set_ylim(0, top * 1.25)
    rounds = max(len(values) for per_group in comparison.series.values() for values in per_group)
    load = (document["load_average_at_start"][0], document["load_average_at_end"][0])
    counted = f"{rounds} interleaved rounds" if len(names) > 1 else f"{rounds} samples"
    subtitle = (
        f"{counted}, {comparison.better} is better; load average {load[0]:.1f} at the start, "
        f"{load[1]:.1f} at the end, {document.get('cpus')} CPUs"
    )
    if comparison.ratio_label:
        where = "above the points" if comparison.plot == "lines" else "above the bars"
        subtitle += f"\n{where}: {comparison.ratio_label}, median (range over the rounds)"
    axes.set_title(f"{comparison.title}\n{subtitle}", fontsize=9)
    axes.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.0, 0.5), frameon=False)
    axes.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    figure.savefig(path, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(figure)


def _bars(axes, comparison: Comparison) -> None:  # noqa: ANN001
    """Per group, a bar at each contender's median, every round's value as a dot over it."""
    names = list(comparison.series)
    width = 0.8 / len(names)
    for s, name in enumerate(names):
        for g, values in enumerate(comparison.series[name]):
            x = g + (s - (len(names) - 1) / 2) * width
            axes.bar(
                x,
                statistics.median(values),
                width * 0.9,
                color=COLOURS[s % len(COLOURS)],
                alpha=0.55,
                label=name if g == 0 else None,
            )
            spread = [x + width * 0.6 * (i / max(1, len(values) - 1) - 0.5) for i in range(len(values))]
            axes.scatter(spread, values, s=9, color=COLOURS[s % len(COLOURS)], zorder=3)


def _lines(axes, comparison: Comparison) -> None:  # noqa: ANN001
    """A line through each contender's medians over the groups (evenly spaced: partition counts
    1, 8, 64 ...), every round's value as a dot on it."""
    for s, (name, per_group) in enumerate(comparison.series.items()):
        colour = COLOURS[s % len(COLOURS)]
        axes.plot(range(len(per_group)), [statistics.median(values) for values in per_group], color=colour, label=name)
        for g, values in enumerate(per_group):
            axes.scatter([g] * len(values), values, s=12, color=colour, alpha=0.7, zorder=3)
    axes.set_xlim(-0.5, len(comparison.groups) - 0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("results", nargs="+", help="JSON files written by the bench scripts' --json")
    parser.add_argument(
        "--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "benchmarks")
    )
    args = parser.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    for results in args.results:
        document, comparisons = load(results)
        if not comparisons:
            raise SystemExit(f"{results}: holds no comparisons (did the run measure anything?)")
        for comparison in comparisons:
            path = os.path.join(args.out, f"{comparison.id}.svg")
            draw(comparison, document, path)
            print(f"{path}: {comparison.title}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
