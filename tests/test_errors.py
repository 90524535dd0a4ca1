"""One root for what the connector raises: every exception class of kafka_spark (the broker's,
which travel as Kafka error codes, aside) is a PylogError, and is still the builtin it was."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import kafka_spark
from kafka_spark.errors import DataLossError, OffsetJsonError, PylogError, PylogOptionError, PylogReadTimeout


def connector_exception_classes() -> list[type[BaseException]]:
    found = []
    for module in pkgutil.walk_packages(kafka_spark.__path__, "kafka_spark."):
        if (
            module.name in ("kafka_spark.broker", "kafka_spark.demo")
            or module.name.startswith("kafka_spark.broker.")
            or module.name.endswith(".__main__")
        ):
            continue
        imported = importlib.import_module(module.name)
        found += [
            c
            for _, c in inspect.getmembers(imported, inspect.isclass)
            if issubclass(c, BaseException) and c.__module__ == imported.__name__
        ]
    return found


def test_every_connector_exception_is_a_pylog_error():
    classes = connector_exception_classes()
    assert len(classes) >= 30, [c.__name__ for c in classes]  # the walk found the modules' classes
    assert [f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, PylogError)] == []


@pytest.mark.parametrize(
    "error,builtin",
    [
        (PylogOptionError, ValueError),
        (OffsetJsonError, ValueError),
        (DataLossError, RuntimeError),
        (PylogReadTimeout, TimeoutError),
    ],
)
def test_errors_keep_the_builtin_they_always_were(error, builtin):
    assert issubclass(error, builtin) and issubclass(error, PylogError)


def test_a_bad_option_is_caught_as_a_pylog_error_with_its_message():
    from kafka_spark.options import parse_source_options

    with pytest.raises(PylogError, match="did you mean startingOffsets"):
        parse_source_options(
            {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t", "startingOffset": "earliest"}
        )


def test_the_old_import_paths_still_name_the_same_classes():
    from kafka_spark.offsets import DataLossError as offsets_data_loss
    from kafka_spark.options import PylogOptionError as options_option_error
    from kafka_spark.read.partition import PylogReadTimeout as reader_timeout

    assert (offsets_data_loss, options_option_error, reader_timeout) == (
        DataLossError,
        PylogOptionError,
        PylogReadTimeout,
    )


def test_the_root_is_exported_by_the_package():
    assert kafka_spark.PylogError is PylogError
