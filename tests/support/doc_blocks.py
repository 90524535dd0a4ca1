"""The code blocks and links of the README and the documentation pages (tests/test_docs_code.py,
tests/test_docs.py), and how each block runs.

A fenced block's info string says what it is (CONTRIBUTING.md, "Documentation"):

* ```` ```python ````: a snippet, run in the test process in the page's own namespace, after the
  page's earlier snippets; ``SparkSession.builder.getOrCreate()`` there is the test session.
* ```` ```python script ````: a whole program, run as ``python FILE`` in a process of its own.
* ```` ```python test ````: a pytest module, run with ``python -m pytest`` in a process of its own.
* ```` ```console ````, ```` ```sh ````, ```` ```bash ````: command lines, run by
  ``bash -euo pipefail`` from the clone's top directory with the virtualenv's ``bin`` first on
  ``PATH`` (what ``source .venv/bin/activate`` does).
* ```` ```text ```` right after a runnable block (nothing but blank lines between): the output that
  block prints, compared line by line (``...`` stands for any text within a line, or for any
  number of lines when alone on its line).
* other languages (``text``, ``json``, ``properties``, ``mermaid``, ...): data, not run.

A runnable block that must not run carries ``<!-- norun: REASON -->`` on the line before it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from markdown_it import MarkdownIt
from myst_parser.slugs import github_slugify, unique_slug

from tests.support.paths import ROOT

#: Languages whose blocks run, and languages that are only shown.
RUNNABLE = {"python", "console", "sh", "bash"}
SHOWN = {"text", "json", "properties", "mermaid", "ini", "yaml", "toml", "avro", "java"}
#: Flags of a python block (the word after the language).
PYTHON_FLAGS = {(), ("script",), ("test",)}

NORUN = re.compile(r"<!--\s*norun:\s*(?P<reason>[^>]*?)\s*-->\s*$")
_MARKDOWN = MarkdownIt("commonmark", {"html": True}).enable("table")


@dataclass(frozen=True)
class Block:
    path: Path  # the Markdown file
    line: int  # where the fence opens, 1-based
    language: str
    flags: tuple[str, ...]  # words after the language in the info string
    code: str
    norun: str | None  # the reason it is not run, if it is marked
    output: str | None  # the ```text block right after it, if any

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.language in RUNNABLE and self.norun is None


def doc_files() -> list[Path]:
    """The README, CONTRIBUTING.md and every Markdown page of the site (generated ones aside)."""
    pages = sorted(p for p in (ROOT / "docs").rglob("*.md") if not {"_generated", "_build"} & set(p.parts))
    return [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *pages]


@cache
def _tokens(path: Path) -> list:
    return _MARKDOWN.parse(path.read_text())


def blocks(path: Path) -> list[Block]:
    """The fenced code blocks of a Markdown file, in order, as markdown-it parses them."""
    lines = path.read_text().splitlines()
    fences = [token for token in _tokens(path) if token.type == "fence"]
    found: list[Block] = []
    for index, token in enumerate(fences):
        info = token.info.split()
        language, flags = (info[0], tuple(info[1:])) if info else ("", ())
        start, end = token.map  # 0-based: the opening fence's line, the line after the closing one
        before = next((line for line in reversed(lines[:start]) if line.strip()), "")
        norun = NORUN.search(before)
        output = None
        if index + 1 < len(fences):
            following = fences[index + 1]
            if following.info.split()[:1] == ["text"] and not "".join(lines[end : following.map[0]]).strip():
                output = following.content
        found.append(
            Block(
                path=path,
                line=start + 1,
                language=language,
                flags=flags,
                code=token.content,
                norun=norun.group("reason") if norun else None,
                output=output,
            )
        )
    return found


def matches_shown(shown: str, printed: str) -> bool:
    """Whether ``printed`` shows what ``shown`` does, line by line in order; ``...`` within a line
    stands for any text, a line of ``...`` alone for any number of lines."""
    pattern = []
    for line in shown.rstrip("\n").splitlines():
        if line.strip() == "...":
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            pattern.append(r"[^\n]*?".join(re.escape(part) for part in line.rstrip().split("...")) + r"[ \t]*\n")
    text = printed if printed.endswith("\n") else printed + "\n"
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    return re.fullmatch("".join(pattern), text, re.S) is not None


def links(path: Path) -> Iterator[tuple[int, str]]:
    """(line, target) of every Markdown link and image of a file, fenced code aside."""
    for token in _tokens(path):
        if token.type != "inline" or not token.children:
            continue
        for child in token.children:
            if child.type == "link_open":
                yield token.map[0] + 1, str(child.attrs["href"])
            elif child.type == "image":
                yield token.map[0] + 1, str(child.attrs["src"])


def anchors(path: Path) -> set[str]:
    """The heading anchors of a Markdown file, as GitHub and the site (MyST) make them."""
    found: set[str] = set()
    tokens = _tokens(path)
    for index, token in enumerate(tokens):
        if token.type == "heading_open":
            title = "".join(child.content for child in tokens[index + 1].children or [] if child.type != "image")
            found.add(unique_slug(github_slugify(title), found))
    return found
