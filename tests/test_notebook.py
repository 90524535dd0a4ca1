"""The exploration notebook runs top to bottom without an error cell, and every figure it shows is
one a reader can read: labelled axes, whole-number ticks on partition and batch axes, quantities
plotted from zero.

The figures are inspected as the notebook displays them: before the notebook runs, the test adds
a cell (to its in-memory copy only) that, before each cell, gives matplotlib figures a JSON
representation beside their PNG. IPython then stores, in the same display output as each image, a description of that
figure's axes taken from the live figure object, which the test reads from the executed notebook.
"""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbformat.v4 import new_code_cell

pytestmark = pytest.mark.spark  # Spark runs in a subprocess

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "exploration.ipynb"
FIGURE_KEY = "pylog-test-figure"

DESCRIBE_FIGURES = f"""
def _describe_figure(fig):
    fig.canvas.draw()  # tick labels are computed at draw time
    axes = []
    for ax in fig.axes:
        low, high = sorted(ax.get_xlim())
        ticks = [(float(position), label.get_text())
                 for position, label in zip(ax.get_xticks(), ax.get_xticklabels()) if low <= position <= high]
        axes.append({{"title": ax.get_title(), "xlabel": ax.get_xlabel(), "ylabel": ax.get_ylabel(),
                     "xticks": ticks, "ylim": [float(v) for v in ax.get_ylim()]}})
    return {{{FIGURE_KEY!r}: axes}}

def _describe_figures(info=None):
    # Before every cell: `%matplotlib inline` drops every formatter registered for figures.
    get_ipython().display_formatter.formatters["application/json"].for_type_by_name(
        "matplotlib.figure", "Figure", _describe_figure)

get_ipython().events.register("pre_run_cell", _describe_figures)
"""


@pytest.fixture(scope="module")
def executed(tmp_path_factory):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    notebook.cells.insert(0, new_code_cell(DESCRIBE_FIGURES))
    NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path_factory.mktemp("notebook"))}},
    ).execute()
    return notebook


def _outputs(notebook):
    return [output for cell in notebook.cells if cell.cell_type == "code" for output in cell.get("outputs", [])]


def _figures(notebook) -> list[list[dict]]:
    """Per displayed figure, its axes as the injected formatter described them."""
    figures = []
    for output in _outputs(notebook):
        data = output.get("data", {})
        if "image/png" in data:
            description = data.get("application/json")
            assert description and FIGURE_KEY in description, (
                f"a figure was shown without its description: {sorted(data)}"
            )
            figures.append(description[FIGURE_KEY])
    return figures


def test_exploration_notebook_executes_without_errors(executed):
    errors = [output for output in _outputs(executed) if output.get("output_type") == "error"]
    assert not errors, errors


def test_every_axis_of_every_figure_is_labelled_and_starts_at_zero(executed):
    axes = [ax for figure in _figures(executed) for ax in figure]
    assert axes, "the notebook showed no figure"
    for ax in axes:
        assert ax["title"].strip(), f"an axes without a title: {ax}"
        assert ax["xlabel"].strip() and ax["ylabel"].strip(), f"{ax['title']!r}: an axis without a label"
        # Every quantity plotted (records, rates, durations, lag) is a non-negative amount.
        assert ax["ylim"][0] == 0, f"{ax['title']!r}: y axis starts at {ax['ylim'][0]}, not 0"


def test_partition_and_batch_axes_have_whole_number_ticks(executed):
    counted = [
        ax
        for figure in _figures(executed)
        for ax in figure
        if "partition" in ax["xlabel"].lower() or "batch" in ax["xlabel"].lower()
    ]
    assert any("partition" in ax["xlabel"] for ax in counted) and any("batch" in ax["xlabel"] for ax in counted)
    for ax in counted:
        assert ax["xticks"], f"{ax['title']!r}: no ticks"
        for position, label in ax["xticks"]:
            assert position == int(position), f"{ax['title']!r}: a tick at {position}"
            assert label.replace("\N{MINUS SIGN}", "-") == str(int(position)), f"{ax['title']!r}: tick {label!r}"


def test_the_notebook_shows_lag_throughput_and_query_progress(executed):
    labels = [(ax["xlabel"].lower(), ax["ylabel"].lower()) for figure in _figures(executed) for ax in figure]
    assert ("partition", "records (messages)") in labels, labels  # records per partition
    assert any(y == "records behind the log end" and "partition" in x for x, y in labels), labels  # lag
    assert any(y == "records behind the log end" and "(s)" in x for x, y in labels), labels  # lag over time
    assert ("micro-batch id", "records processed per second") in labels, labels  # throughput
    assert ("micro-batch id", "records read") in labels, labels  # query progress
    assert ("micro-batch id", "duration (s)") in labels, labels
