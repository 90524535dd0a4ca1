"""The benchmarks' results as JSON (``--json PATH``), the data bench/plot.py draws from.

A file holds one run of one script: what ran (command, interpreter, load average at the start and
end, UTC time) and its comparisons. A comparison holds every round's value, not only medians, so
a plot and a reader see the spread: ``series`` maps each contender (``"pylog"``, ``"Spark's
source"``) to one list of per-round values per group (the groups are what the plot's x axis
shows: percentiles, partition counts, or a single measure), and ``ratios`` holds the per-round
ratio first/second of each group. ``plot`` is how bench/plot.py draws it: ``"bars"`` (a bar a
contender a group) or ``"lines"`` (a line a contender over the groups, for groups on a scale such
as partition counts), ``x_label`` what the groups are.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import statistics
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = 1


@dataclass
class Comparison:
    """One comparison: ``series[name][g][r]`` is contender ``name``'s value in group ``g``, round ``r``."""

    id: str
    title: str
    unit: str
    better: str  # "lower" or "higher": which way a value is better
    groups: list[str]
    series: dict[str, list[list[float]]]
    ratio_label: str = ""
    log_y: bool = False
    note: str = ""
    ratios: list[list[float]] = field(default_factory=list)
    plot: str = "bars"
    x_label: str = ""

    def __post_init__(self) -> None:
        if self.better not in ("lower", "higher"):
            raise ValueError(f"comparison {self.id!r}: better must be 'lower' or 'higher', not {self.better!r}")
        if self.plot not in ("bars", "lines"):
            raise ValueError(f"comparison {self.id!r}: plot must be 'bars' or 'lines', not {self.plot!r}")
        for name, per_group in self.series.items():
            if len(per_group) != len(self.groups):
                raise ValueError(
                    f"comparison {self.id!r}: series {name!r} has {len(per_group)} groups of values, "
                    f"the comparison names {len(self.groups)} ({self.groups})"
                )
        if not self.ratios and len(self.series) == 2:
            first, second = self.series.values()
            self.ratios = [
                [a / b for a, b in zip(xs, ys, strict=False) if b] for xs, ys in zip(first, second, strict=True)
            ]

    @classmethod
    def rates(
        cls, id: str, title: str, series: dict[str, list[float]], ratio_label: str, group: str, unit: str = "rows/s"
    ) -> Comparison:
        """A comparison of one measure (``group``) where higher is better: ``series`` maps each
        contender to its per-round values; the ratio is the first over the second."""
        return cls(id, title, unit, "higher", [group], {name: [values] for name, values in series.items()}, ratio_label)

    def summary(self) -> list[str]:
        """One line per group: medians of each series and the median ratio with its range."""
        lines = []
        for g, group in enumerate(self.groups):
            parts = [f"{name} {statistics.median(values[g]):,.4g} {self.unit}" for name, values in self.series.items()]
            if self.ratios and self.ratios[g]:
                ratio = self.ratios[g]
                parts.append(f"{self.ratio_label} {statistics.median(ratio):.2f} ({min(ratio):.2f}-{max(ratio):.2f})")
            lines.append(f"{self.id} {group}: " + "   ".join(parts))
        return lines


@dataclass
class Results:
    """The comparisons of one run of ``benchmark``; :meth:`write` saves them as JSON."""

    benchmark: str
    settings: dict[str, Any]
    comparisons: list[Comparison] = field(default_factory=list)
    load_at_start: tuple[float, float, float] = field(default_factory=os.getloadavg)
    started: str = field(default_factory=lambda: _now())

    def add(self, comparison: Comparison) -> Comparison:
        self.comparisons.append(comparison)
        return comparison

    def write(self, path: str) -> None:
        document = {
            "schema": SCHEMA,
            "benchmark": self.benchmark,
            "command": [os.path.basename(sys.argv[0]), *sys.argv[1:]],
            "settings": self.settings,
            "started": self.started,
            "finished": _now(),
            "load_average_at_start": list(self.load_at_start),
            "load_average_at_end": list(os.getloadavg()),
            "cpus": os.cpu_count(),
            "python": f"{platform.python_implementation()} {platform.python_version()}",
            "comparisons": [asdict(c) for c in self.comparisons],
        }
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as out:
            json.dump(document, out, indent=1)
            out.write("\n")


def load(path: str) -> tuple[dict[str, Any], list[Comparison]]:
    """A results file and its comparisons; a file of another layout is named, not half-read."""
    with open(path) as source:
        document = json.load(source)
    if not isinstance(document, dict) or document.get("schema") != SCHEMA:
        raise ValueError(
            f"{path}: not a benchmark results file of schema {SCHEMA} (written by a bench script's --json)"
        )
    try:
        comparisons = [Comparison(**c) for c in document["comparisons"]]
    except (KeyError, TypeError) as error:
        raise ValueError(f"{path}: a comparison lacks or misspells a field ({error})") from error
    return document, comparisons


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
