"""Driver side of the topic sink: the writers Spark creates for a streaming or batch write, and
the marker topic and admin connection they check first. The tasks' writes, and the exactly-once
protocol, are in kafka_spark.topics.task; its functions are called through the module
(``task.write_exactly_once``), so that scripts/chaos_hooks can wrap them.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter

from kafka_spark.client.librdkafka_log import routed
from kafka_spark.spark_api import StreamArrowWriter
from kafka_spark.topics import task
from kafka_spark.topics.options import AT_LEAST_ONCE, EXACTLY_ONCE, TopicSinkError, TopicSinkOptions, _security

log = logging.getLogger("kafka_spark")


def connect_admin(options: TopicSinkOptions) -> tuple[Any, Any]:
    """An admin client of the sink's cluster and the cluster's metadata. Called when a query is
    defined, so that an unreachable cluster or refused credentials fail it then, with the reason,
    rather than tasks after librdkafka's message timeout. A cluster that accepts no connection or
    does not answer (kafka_spark.client.reachability) is waited for up to
    kafka.default.api.timeout.ms, as the source waits, before the admin client is created."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kafka_spark.client.reachability import ClusterUnreachable, wait_reachable
    from kafka_spark.client.refusal import CredentialsRefused, RefusalWatch, list_topics_watching
    from kafka_spark.client.token_provider import TokenLoginError

    try:
        wait_reachable(options.bootstrap_servers, options.default_api_timeout_ms / 1000.0, require_answer=True)
    except ClusterUnreachable as error:
        raise TopicSinkError(
            f"pylog topic sink: {error}. Check that the broker runs and that kafka.bootstrap.servers names it; "
            f"set kafka.default.api.timeout.ms (now {options.default_api_timeout_ms}) to wait longer."
        ) from None

    refusal = RefusalWatch()
    try:
        admin = AdminClient(
            routed({"bootstrap.servers": options.bootstrap_servers, **dict(_security(options)), "error_cb": refusal})
        )
    except TokenLoginError as error:
        raise TopicSinkError(f"pylog topic sink: {error}") from None
    try:
        return admin, list_topics_watching(admin, refusal, options.bootstrap_servers, 15)
    except CredentialsRefused as error:
        raise TopicSinkError(str(error)) from None
    except KafkaException as error:
        raise TopicSinkError(
            f"cannot reach Kafka at {options.bootstrap_servers} ({error.args[0].str()}); check kafka.bootstrap.servers"
        ) from None


def ensure_marker_topic(options: TopicSinkOptions) -> None:
    """Create the marker topic if missing; fails fast (at query start) if the broker is unreachable."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic

    admin, metadata = connect_admin(options)
    if options.marker_topic in metadata.topics:
        return
    futures = admin.create_topics(
        [NewTopic(options.marker_topic, num_partitions=1, config={"cleanup.policy": "compact"})]
    )
    try:
        futures[options.marker_topic].result(timeout=30)
    except KafkaException as error:
        if "TOPIC_ALREADY_EXISTS" not in str(error):
            raise TopicSinkError(f"cannot create the marker topic {options.marker_topic!r}: {error}") from None


def check_cluster(options: TopicSinkOptions) -> None:
    """Fail the query now, naming the cause, if the cluster is unreachable or refuses us: with
    exactly-once delivery by making sure the marker topic exists, else by connecting an admin."""
    if options.delivery == EXACTLY_ONCE:
        ensure_marker_topic(options)
    else:
        connect_admin(options)


class TopicStreamWriter(StreamArrowWriter):
    def __init__(self, options: TopicSinkOptions, define: bool = True) -> None:
        self.options = options
        if not define:
            return
        check_cluster(options)

    def write(self, iterator: Iterator[Any]) -> task.TopicSinkCommitMessage:
        if self.options.delivery == AT_LEAST_ONCE:
            return task.write_at_least_once(self.options, iterator)
        query_id, batch_id, _, _ = task._task_ids()
        if query_id is None or batch_id is None:
            raise TopicSinkError("pylog topic sink: no streaming query id / batch id in the task context")
        return task.write_exactly_once(self.options, iterator, query_id, batch_id)

    def commit(self, messages: list[Any], batchId: int) -> None:
        rows = sum(m.rows for m in messages if m is not None)
        skipped = sum(1 for m in messages if m is not None and m.skipped)
        log.info(
            "pylog topic sink: batch %d committed (%d rows, %d task(s) skipped as already committed)",
            batchId,
            rows,
            skipped,
        )

    def abort(self, messages: list[Any], batchId: int) -> None:
        # Nothing to undo: an uncommitted transaction is aborted by the next attempt's
        # init_transactions or by the transaction timeout, and stays invisible to read_committed.
        log.warning("pylog topic sink: batch %d aborted", batchId)


class TopicBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: TopicSinkOptions) -> None:
        self.options = options
        # One write id per job, shared by every task attempt; a micro-batch written through
        # foreachBatch (kafka_spark.update_mode) is its query's batch, skipped when replayed.
        self.write_id = options.query_id or f"batch-{uuid.uuid4()}"
        self.batch_id = options.batch_id if options.batch_id is not None else 0
        check_cluster(options)

    def write(self, iterator: Iterator[Any]) -> task.TopicSinkCommitMessage:
        if self.options.delivery == AT_LEAST_ONCE:
            return task.write_at_least_once(self.options, iterator)
        return task.write_exactly_once(self.options, iterator, self.write_id, self.batch_id)

    def commit(self, messages: list[Any]) -> None:
        log.info(
            "pylog topic sink: batch write %s committed (%d rows)",
            self.write_id,
            sum(m.rows for m in messages if m is not None),
        )

    def abort(self, messages: list[Any]) -> None:
        log.warning("pylog topic sink: batch write %s aborted", self.write_id)
