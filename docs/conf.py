"""Sphinx configuration of pylog's documentation site (``make docs``).

The pages are Markdown (MyST), so they read the same on a repository browser. The reference
tables are generated from the code when the site is built (``_ext/pylog_reference.py``), the
Python API from the docstrings (autodoc). ``make docs`` builds with ``-W --keep-going``: a broken
link, a missing page or anchor, or a docstring that does not render is an error.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(HERE.parent))

import kafka_spark  # noqa: E402  (the path above is where it is found in a checkout)

project = "pylog"
author = "the pylog authors"
copyright = "the pylog authors"  # noqa: A001  (Sphinx's setting name)
release = version = kafka_spark.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinxcontrib.mermaid",
    "pylog_reference",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
# _generated/ holds the reference tables (written at build time, included by the reference pages).
exclude_patterns = ["_build", "_generated", "README.md"]

# MyST: GitHub's heading anchors (links such as page.md#a-heading are checked), ```mermaid
# fences as diagrams (GitHub renders the same fences), ::: blocks and definition lists.
myst_heading_anchors = 4
myst_fence_as_directive = ["mermaid"]
myst_enable_extensions = ["colon_fence", "deflist", "attrs_block"]
# a link to a file outside the site (examples/, scripts/) is an error: name such files as code
myst_links_external_new_tab = False

html_theme = "furo"
html_title = f"pylog {release}"
html_static_path: list[str] = []
html_show_sourcelink = False

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "show-inheritance": True}
# Spark, confluent-kafka and the broker's dependencies are installed with the docs extra's
# package; nothing is mocked, so the reference documents what imports.
# Every cross-reference resolves (-n): a docstring naming a class, method or attribute the reference
# does not have fails the build. The references that cannot resolve without fetching other projects'
# inventories (no network in the build), and the broker's internal types that annotations name but
# the reference does not document, are listed here.
nitpicky = True
nitpick_ignore_regex = [
    ("py:.*", r"(pyspark|pytest|_pytest|os|pathlib|collections\.abc|typing)\..*"),
    ("py:class", r"Path|OidcProvider"),
    ("py:class", r"kafka_spark\.broker\.(server|broker|cluster\.\w+|metadata\.\w+|replication\.\w+)\.\w+"),
]

# Warnings are errors in `make docs` (-W); these are the ones that say nothing about our pages.
suppress_warnings = ["myst.header"]
