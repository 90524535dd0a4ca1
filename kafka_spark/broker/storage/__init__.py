"""The broker's storage layer, in Kafka's terms.

``LogManager`` (topics of a log directory) -> ``Log`` (one topic-partition) -> ``LogSegment``
(``.log`` + ``OffsetIndex`` + ``TimeIndex``), with record batch v2 handling in ``batch`` and
per-topic settings in ``LogConfig``. Batches are stored verbatim; work is per batch, not per record.
"""

from kafka_spark.broker.storage.config import LogConfig
from kafka_spark.broker.storage.log import AppendResult, Log
from kafka_spark.broker.storage.log_manager import LogManager, TopicInfo

__all__ = ["AppendResult", "Log", "LogConfig", "LogManager", "TopicInfo"]
