"""What pylog's connector raises: one root, :class:`PylogError`, that a user can catch.

Every exception class of the connector (the source, both sinks, Avro, the CLI, the client
plumbing) derives from :class:`PylogError`, and also from the builtin it has always been (a bad
option is still a ``ValueError``, a read timeout a ``TimeoutError``), so code that caught the
builtin keeps working. The messages name what is wrong and what to do.

The broker's errors are Kafka's: they travel as error codes on the wire
(``kafka_spark.broker.storage.errors`` and kio's ``ErrorCode``) and are not rooted here.

Raised inside a Spark task or a Python worker, an error reaches the driver as Spark's own
exception (``PythonException``, ``StreamingQueryException``) carrying this one's message;
``PylogError`` itself is caught where pylog's code runs in the user's process: the batch
writer of ``topic_writer``, ``lag_metrics``, the CLI, offset and option helpers.
"""

from __future__ import annotations

__all__ = ["DataLossError", "KafkaReadError", "OffsetJsonError", "PylogError", "PylogOptionError", "PylogReadTimeout"]


class PylogError(Exception):
    """Root of every exception the connector raises."""


class PylogOptionError(PylogError, ValueError):
    """An invalid source option; the message names the option and what to set instead."""


class OffsetJsonError(PylogError, ValueError):
    """Offset or partition JSON that does not have Spark's shape; the message quotes the shape."""


class DataLossError(PylogError, RuntimeError):
    """Offsets a query should read are gone (retention, a deleted topic, a log that moved
    backwards). Raised only with ``failOnDataLoss=true``; the message names topic, partition and
    offsets."""


class KafkaReadError(PylogError, RuntimeError):
    """Reading a partition failed in a way that retrying in the task cannot fix (a fatal client
    error, records out of order, an offset reported out of range again and again); the message
    names the topic-partition and the offset."""


class PylogReadTimeout(PylogError, TimeoutError):
    """No record arrived for an offset the driver planned, within ``kafkaConsumer.pollTimeoutMs``."""
