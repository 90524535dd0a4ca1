"""The README's promises: it stays short, it starts with the two commands, its install lines name
the right distribution, and every link of the README and the documentation pages resolves
(relative links to files and to headings; external addresses are not fetched)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from tests.support.doc_blocks import anchors, blocks, doc_files, links
from tests.support.paths import ROOT

README = ROOT / "README.md"
#: The README fits on a few screens; what the docs hold in full it links to.
README_MAX_LINES = 250


def test_readme_is_short():
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines: move the detail into docs/ and link to it"


def test_readme_starts_with_the_two_commands():
    first = blocks(README)[0]
    assert first.language == "console"
    assert [line.split()[:2] for line in first.code.splitlines()] == [["make", "demo"], ["make", "test"]]
    # `make demo` is what tests/test_demo.py runs (python -m kafka_spark.demo); `make test` is the
    # command running this very test. Both targets must exist as written:
    makefile = (ROOT / "Makefile").read_text()
    assert re.search(r"^demo:.*\n\t\$\(PY\) -m kafka_spark.demo$", makefile, re.MULTILINE)
    assert re.search(r"^test:.*\n\t\$\(PY\) -m pytest", makefile, re.MULTILINE)


def test_install_lines_name_the_distribution_not_the_other_pylog():
    """`pip install pylog` installs an unrelated package from the index: every install line in the
    README, the pages and the package's messages names pyspark-pylog or a path."""
    texts = {str(p.relative_to(ROOT)): p.read_text() for p in doc_files()}
    texts.update({str(p.relative_to(ROOT)): p.read_text() for p in (ROOT / "kafka_spark").rglob("*.py")})
    for name, text in texts.items():
        for target in re.findall(r"pip install ((?:-\S+ )*[^\s`\"]+)", text):
            assert not re.match(r"['\"]?pylog\b", target), f"{name}: pip install {target}"
    assert "name = pyspark-pylog" in (ROOT / "setup.cfg").read_text()


def test_activating_the_virtualenv_puts_python_and_pylog_on_path():
    """What the pages' command lines assume (`source .venv/bin/activate`), on the .venv `make` creates."""
    result = subprocess.run(
        ["bash", "-c", "unset VIRTUAL_ENV; source .venv/bin/activate && command -v python && command -v pylog"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(ROOT / ".venv" / "bin" / "python"), str(ROOT / ".venv" / "bin" / "pylog")]


def _broken(page: Path, target: str) -> str | None:
    """Why a link of ``page`` does not resolve, or None."""
    parts = urlsplit(target)
    if parts.scheme or parts.netloc:
        return None if parts.scheme in {"http", "https", "mailto"} else f"an unknown scheme: {target}"
    path = (page.parent / unquote(parts.path)).resolve() if parts.path else page
    if not path.exists():
        return f"no file {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}"
    if not path.is_relative_to(ROOT):
        return "a link out of the repository"
    if parts.fragment and path.suffix == ".md" and parts.fragment not in anchors(path):
        return f"no heading #{parts.fragment} in {path.relative_to(ROOT)}"
    return None


@pytest.mark.parametrize("page", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve(page: Path):
    broken = [
        f"{page.relative_to(ROOT)}:{line}: {target}: {why}"
        for line, target in links(page)
        if (why := _broken(page, target))
    ]
    assert broken == []


def test_a_broken_link_is_found(tmp_path):
    """The link check is not vacuous: a missing file and a missing heading are both reported."""
    assert any(True for _ in links(README))
    assert _broken(README, "docs/no-such-page.md") is not None
    assert _broken(README, "docs/migrating.md#no-such-heading") is not None
    assert _broken(README, "docs/migrating.md") is None
