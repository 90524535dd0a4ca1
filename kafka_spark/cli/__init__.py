"""The ``pylog`` command: ``main`` is its entry point (``pylog = kafka_spark.cli:main``).

One module per group of commands: main.py (the parser and the broker, topics and groups
commands), console.py (produce / consume), acls.py, users.py, cluster.py; record_format.py is how
``pylog consume`` prints a record, group_admin.py the OffsetDelete client, console_fetch.py and
console_records.py the wire path of `pylog consume`.
"""

from kafka_spark.cli.main import main

__all__ = ["main"]
