"""Build configuration beyond setup.cfg: the optional C extension of `pylog consume`'s default
output (kafka_spark/cli/_console_values.c). Optional: without a C compiler the install goes on and
kafka_spark.cli.console_records takes the same walk in Python (same output, slower)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "kafka_spark.cli._console_values",
            ["kafka_spark/cli/_console_values.c"],
            # generated from kafka_spark/common/record_batch.py (tests/common/test_record_batch.py)
            depends=["kafka_spark/cli/_record_layout.h"],
            optional=True,
        )
    ]
)
