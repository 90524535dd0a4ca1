"""Every code block of the README runs as written."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

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


def test_python_blocks_run(tmp_path):
    python_blocks = blocks("python")
    assert len(python_blocks) == 2
    quickstart, fixture_example = python_blocks
    script = tmp_path / "quickstart.py"
    script.write_text(quickstart)
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                            cwd=tmp_path, env=dict(os.environ))
    assert result.returncode == 0, result.stderr[-3000:]
    test_file = tmp_path / "test_user_pipeline.py"
    test_file.write_text(fixture_example)
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test_file)],
                            capture_output=True, text=True, timeout=300, cwd=tmp_path, env=dict(os.environ))
    assert result.returncode == 0 and "1 passed" in result.stdout, result.stdout[-3000:]


def test_shell_block_runs(tmp_path):
    (block,) = blocks("sh")
    env = dict(os.environ, WORK=str(tmp_path), PYLOG_HOME=str(tmp_path / "home"),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["bash", "-euo", "pipefail", "-c", block], capture_output=True, text=True,
                            timeout=300, env=env)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "clicked" in result.stdout and "bought" in result.stdout
    assert "Topic events has 4 partitions now." in result.stdout
    assert "PartitionCount: 4\tConfigs: retention.ms=86400000" in result.stdout
    assert "stopped" in result.stdout
