"""Every public name of the Python API has a docstring, and the reference page renders them
(docs/reference/python-api.md; `make docs` fails on a docstring Sphinx cannot render cleanly)."""

from __future__ import annotations

import importlib
import inspect
import pydoc
import re

import pytest

from tests.support.paths import ROOT

#: The modules a pipeline, a notebook or a test imports: the package, the broker, the pytest
#: fixtures, the sinks' helpers (the topic writer, the file table's offsets and vacuum), and the
#: sample data, errors and schema registry the guides use.
PUBLIC_MODULES = [
    "kafka_spark",
    "kafka_spark.broker",
    "kafka_spark.testing",
    "kafka_spark.update_mode",
    "kafka_spark.files.table",
    "kafka_spark.lag",
    "kafka_spark.sample_data",
    "kafka_spark.errors",
    "kafka_spark.avro.registry_server",
]


def public_names(module) -> list[str]:
    """``__all__``, or what the module itself defines (classes and functions) without a leading ``_``."""
    names = getattr(module, "__all__", None)
    if names is None:
        names = [
            name
            for name, value in vars(module).items()
            if not name.startswith("_")
            and (inspect.isclass(value) or inspect.isfunction(value))
            and value.__module__ == module.__name__
        ]
    return [name for name in names if name != "__version__"]


def undocumented(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    missing = [] if inspect.getdoc(module) else [module_name]
    for name in public_names(module):
        value = getattr(module, name)
        if not inspect.getdoc(value):
            missing.append(f"{module_name}.{name}")
        if inspect.isclass(value):
            for attribute, member in vars(value).items():
                if attribute.startswith("_") or not (
                    callable(member) or isinstance(member, (property, classmethod, staticmethod))
                ):
                    continue
                # getattr + getdoc: an override of a documented base method (a Spark listener's) inherits its text
                if not inspect.getdoc(getattr(value, attribute)) and not inspect.getdoc(member):
                    missing.append(f"{module_name}.{name}.{attribute}")
    return missing


@pytest.mark.parametrize("module_name", PUBLIC_MODULES)
def test_public_names_have_docstrings(module_name):
    assert public_names(importlib.import_module(module_name)), f"{module_name}: no public names found"
    assert undocumented(module_name) == []


def test_the_check_finds_a_missing_docstring():
    """The check is not vacuous: a class with an undocumented method is reported."""
    module = type(inspect)("kafka_spark_doc_probe")
    exec("class Probe:\n    '''Documented.'''\n    def method(self):\n        pass\n", module.__dict__)  # noqa: S102
    module.__all__ = ["Probe"]
    import sys

    sys.modules[module.__name__] = module
    try:
        assert undocumented(module.__name__) == ["kafka_spark_doc_probe", "kafka_spark_doc_probe.Probe.method"]
    finally:
        del sys.modules[module.__name__]


def test_the_reference_page_renders_every_public_module():
    """Each module checked above is on the Python API page: autodoc renders the module itself or a
    name it defines (``kafka_spark.topic_writer`` is ``kafka_spark.update_mode``'s)."""
    page = (ROOT / "docs" / "reference" / "python-api.md").read_text()
    rendered = [pydoc.locate(name) for name in re.findall(r"\.\. auto(?:module|class|function):: ([\w.]+)", page)]
    assert None not in rendered, "a name on the page does not import"
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = [getattr(module, name) for name in public_names(module)]
        assert any(value is module or any(value is name for name in names) for value in rendered), module_name
