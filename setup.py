"""Build configuration beyond setup.cfg: the optional C extension of `pylog consume`'s default
output (kafka_spark/cli/_console_values.c).

Optional: without a C compiler the install goes on and kafka_spark.cli.console_records takes the
same walk in Python (same output, slower). The extension uses Python's limited API, so a wheel
that carries it is tagged abi3 and serves every CPython from 3.11 on.

PYLOG_NO_EXTENSIONS=1 builds without it: the pure wheel (py3-none-any) of a release, which
installs wherever PySpark does (scripts/build_dist.py builds the release's sdist and wheels).
"""

import os

from setuptools import Extension, setup

if os.environ.get("PYLOG_NO_EXTENSIONS") == "1":
    setup()
else:
    setup(
        ext_modules=[
            Extension(
                "kafka_spark.cli._console_values",
                ["kafka_spark/cli/_console_values.c"],
                # generated from kafka_spark/common/record_batch.py (tests/common/test_record_batch.py)
                depends=["kafka_spark/cli/_record_layout.h"],
                optional=True,
                py_limited_api=True,
            )
        ],
        options={"bdist_wheel": {"py_limited_api": "cp311"}},
    )
