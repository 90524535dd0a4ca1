"""Every code block of the README and the documentation runs as written, and prints what the page
says it prints (tests/support/doc_blocks.py says how each kind of block runs).

A page's ```python snippets run in this process, one after the other in one namespace, with the
session's Spark (``SparkSession.builder.getOrCreate()`` returns it) and the embedded brokers the
snippets start themselves; whole programs (```python script), pytest modules (```python test) and
command lines run in processes of their own. A block that cannot run here says why
(``<!-- norun: REASON -->``).
"""

from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.doc_blocks import PYTHON_FLAGS, RUNNABLE, SHOWN, Block, blocks, doc_files, matches_shown
from tests.support.paths import ROOT

ALL_BLOCKS = [block for path in doc_files() for block in blocks(path)]
RUNNING = [block for block in ALL_BLOCKS if block.runs]


def _uses_spark(code: str) -> bool:
    return "SparkSession" in code or "pyspark" in code


def _param(block: Block):
    marks = [pytest.mark.spark] if _uses_spark(block.code) else []
    return pytest.param(block, id=block.where, marks=marks)


def _pages_with_snippets() -> list:
    pages: dict[Path, list[Block]] = {}
    for block in RUNNING:
        if block.language == "python" and not block.flags:
            pages.setdefault(block.path, []).append(block)
    return [pytest.param(snippets, id=str(path.relative_to(ROOT))) for path, snippets in pages.items()]


def _environment(tmp_path: Path) -> dict[str, str]:
    """A user's shell after `source .venv/bin/activate`, with temporary files and the local broker
    registry in the test's directory."""
    return dict(
        os.environ,
        TMPDIR=str(tmp_path),
        PYLOG_HOME=str(tmp_path / "pylog-home"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )


def _run(command: list[str], tmp_path: Path, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """A page's program, test module or command line in a process of its own, as a user runs it."""
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=_environment(tmp_path))


def _check_output(block: Block, printed: str) -> None:
    if block.output is not None:
        assert matches_shown(block.output, printed), (
            f"{block.where} printed what its page does not show:\n{printed[-3000:]}\n"
            f"--- the page shows:\n{block.output}"
        )


def test_every_block_runs_or_says_why_not():
    """A block is code that runs, data that is shown, or code marked with the reason it cannot run:
    a language the runner does not know fails here rather than being skipped unseen."""
    assert len(ALL_BLOCKS) > 40 and len(RUNNING) > 25
    for block in ALL_BLOCKS:
        if block.language.startswith("{"):  # a MyST directive (toctree, include, eval-rst)
            continue
        assert block.language in RUNNABLE | SHOWN, (
            f"{block.where}: a ```{block.language} block: add it to RUNNABLE or SHOWN"
        )
        if block.norun is not None:
            assert block.language in RUNNABLE, f"{block.where}: a norun mark on a block that is not run anyway"
            assert len(block.norun.split()) >= 3, f"{block.where}: say why it cannot run, in words a user accepts"
        if block.language == "python":
            assert block.flags in PYTHON_FLAGS, f"{block.where}: ```python {' '.join(block.flags)}"


@pytest.mark.parametrize("snippets", _pages_with_snippets())
def test_page_snippets_run_in_order(snippets: list[Block], spark):
    """``spark`` is the session's: the snippets' ``SparkSession.builder.getOrCreate()`` returns it."""
    namespace: dict[str, object] = {"__name__": "__main__"}
    try:
        for block in snippets:
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                exec(compile(block.code, block.where, "exec"), namespace)  # noqa: S102 - the page's own code
            _check_output(block, printed.getvalue())
    except BaseException:
        _close_what_the_page_opened(namespace)
        raise


def _close_what_the_page_opened(namespace: dict[str, object]) -> None:
    """After a failed snippet, the brokers and queries the page's later snippets would have
    stopped, so the failure is reported alone rather than with a leak check's error."""
    from pyspark.sql import SparkSession

    session = SparkSession.getActiveSession()
    for query in session.streams.active if session else []:
        query.stop()
    for value in namespace.values():
        if type(value).__name__ in {"EmbeddedBroker", "EmbeddedCluster", "EmbeddedSchemaRegistry", "OidcProvider"}:
            with contextlib.suppress(Exception):
                value.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("block", [_param(b) for b in RUNNING if b.language == "python" and b.flags == ("script",)])
def test_script_runs(block: Block, tmp_path):
    script = tmp_path / f"{block.path.stem}_{block.line}.py"
    script.write_text(block.code)
    result = _run([sys.executable, str(script)], tmp_path, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, f"{block.where}\n{result.stderr[-3000:]}"
    _check_output(block, result.stdout)


@pytest.mark.spark  # the testing guide's Spark test, in pytest's process
def test_pytest_modules_pass(tmp_path):
    """The pages' test modules, as a user's tests: run by pytest with pylog's plugin (installed with
    the package) and nothing of this suite's conftest. One run, so one Spark start for all."""
    modules = [b for b in RUNNING if b.language == "python" and b.flags == ("test",)]
    assert modules, "no ```python test block: the testing guide's examples are gone"
    expected = 0
    for number, block in enumerate(modules):
        (tmp_path / f"test_doc_{number}_{block.path.stem}.py").write_text(block.code)
        tree = ast.parse(block.code)
        tests = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test")]
        assert tests, f"{block.where}: a ```python test block without a test function"
        expected += len(tests)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)]
    result = _run(command, tmp_path, cwd=tmp_path, timeout=600)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert re.search(rf"\b{expected} passed\b", result.stdout), result.stdout[-2000:]


@pytest.mark.parametrize("block", [_param(b) for b in RUNNING if b.language in ("console", "sh", "bash")])
def test_command_lines_run(block: Block, tmp_path):
    result = _run(["bash", "-euo", "pipefail", "-c", block.code], tmp_path, cwd=ROOT, timeout=300)
    assert result.returncode == 0, f"{block.where}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    _check_output(block, result.stdout)
