"""The exploration notebook runs top to bottom without an error cell."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient

NOTEBOOK = Path(__file__).resolve().parents[1] / "notebooks" / "exploration.ipynb"


def test_exploration_notebook_executes_without_errors(tmp_path):
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    assert not errors, errors
    images = [output for cell in notebook.cells if cell.cell_type == "code"
              for output in cell.get("outputs", []) if "image/png" in output.get("data", {})]
    assert len(images) >= 3, "partition counts, throughput and lag plots"
