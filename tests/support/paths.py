"""Where things are, for tests at any depth of the tree: the repository root and its folders."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
GOLDEN = TESTS / "golden"
DATA = TESTS / "data"
BENCH = ROOT / "bench"
SCRIPTS = ROOT / "scripts"
