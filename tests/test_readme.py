"""Every code block of the README runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(language: str) -> list[str]:
    return [code for lang, code in BLOCK.findall((ROOT / "README.md").read_text()) if lang == language]


def test_readme_starts_with_the_two_commands():
    first_language, first_code = BLOCK.findall((ROOT / "README.md").read_text())[0]
    assert first_language == "console"
    assert [line.split()[:2] for line in first_code.splitlines()] == [["make", "demo"], ["make", "test"]]
    # `make demo` is what tests/test_demo.py runs (python -m kafka_spark.demo); `make test` is the
    # command running this very test. Both targets must exist as written:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:.*\n\t\$\(PY\) -m kafka_spark.demo$", makefile, re.MULTILINE)
    assert re.search(r"^test:.*\n\t\$\(PY\) -m pytest", makefile, re.MULTILINE)
    assert not {lang for lang, _ in BLOCK.findall((ROOT / "README.md").read_text())} - {"console", "python", "sh"}


@pytest.mark.spark  # Spark runs in a subprocess
def test_python_blocks_run(tmp_path):
    python_blocks = blocks("python")
    assert len(python_blocks) == 3
    quickstart, cluster_example, fixture_example = python_blocks
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart)
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    # what the README says it prints on success
    assert re.search(rf"^1000 orders written to {re.escape(str(tmp_path))}/tmp\S+/orders$", result.stdout, re.MULTILINE)
    assert "prints `1000 orders written to /tmp/tmp.../orders`" in " ".join((ROOT / "README.md").read_text().split())
    script = tmp_path / "cluster.py"
    script.write_text(cluster_example)
    result = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ, TMPDIR=str(tmp_path)),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[-1] == "ISR of orders-0: [0, 1, 2]"
    assert "prints `ISR of orders-0: [0, 1, 2]`" in (ROOT / "README.md").read_text()
    test_file = tmp_path / "test_user_pipeline.py"
    test_file.write_text(fixture_example)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        env=dict(os.environ),
    )
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-3000:]


def test_shell_block_runs(tmp_path):
    (block,) = blocks("sh")
    assert block.startswith("WORK=$(mktemp -d)")  # the block defines what it uses
    env = dict(
        os.environ,
        TMPDIR=str(tmp_path),
        PYLOG_HOME=str(tmp_path / "home"),
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
    )
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "clicked" in result.stdout and "bought" in result.stdout
    assert "Topic events has 4 partitions now." in result.stdout
    assert "PartitionCount: 4\tConfigs: retention.ms=86400000" in result.stdout
    assert "stopped" in result.stdout


def test_activating_the_virtualenv_puts_python_and_pylog_on_path():
    """The README's `source .venv/bin/activate`, on the .venv that `make` creates."""
    assert "`source .venv/bin/activate` puts `python` and the `pylog` command on your `PATH`" in " ".join(
        (ROOT / "README.md").read_text().split()
    )
    result = subprocess.run(
        ["bash", "-c", "source .venv/bin/activate && command -v python && command -v pylog"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / ".venv" / "bin" / "pylog")]


def test_install_lines_name_the_distribution_not_the_other_pylog():
    """`pip install pylog` installs an unrelated package from the index: every install line in
    the README and the package's messages names pyspark-pylog or a path."""
    texts = {"README.md": (ROOT / "README.md").read_text()}
    texts.update({str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "kafka_spark").rglob("*.py")})
    for name, text in texts.items():
        for target in re.findall(r"pip install ((?:-\S+ )*[^\s`\"]+)", text):
            assert not re.match(r"['\"]?pylog\b", target), f"{name}: pip install {target}"
    assert "name = pyspark-pylog" in (ROOT / "setup.cfg").read_text()
