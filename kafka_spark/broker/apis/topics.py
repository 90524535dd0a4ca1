"""CreateTopics (19), DeleteTopics (20) and CreatePartitions (37), which any broker takes and hands
to the controller (metadata/controller.py): it places the replicas (Kafka's rack-unaware
assignment, replication factor from the request or default.replication.factor, 1 on a single
node) and every replica's broker creates, grows or deletes its logs when it applies the new
metadata. Explicit replica assignments are accepted when they name registered brokers
(INVALID_REPLICA_ASSIGNMENT for any other id, as Kafka answers an unknown broker).

CreateTopics v5+ (KIP-525) answers each created topic with its partition count, replication
factor and configs (as DescribeConfigs lists them), v7 with its id. DeleteTopics v6 names topics
by name or by id. With an authorizer: CREATE on the cluster or the topic, DELETE and ALTER on the
topic (29 TOPIC_AUTHORIZATION_FAILED otherwise).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.configs import topic_config_entries
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.apis.topic_ids import topic_id
from kafka_spark.broker.internal_topics import is_internal_topic
from kafka_spark.broker.storage.config import normalize_topic_configs
from kafka_spark.broker.storage.errors import StorageError

logger = logging.getLogger("kafka_spark.broker")


def handle_create(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    results = []
    on_cluster = access.allowed_on_cluster(broker, request, access.CREATE)
    for topic in body.topics:
        if on_cluster or access.allowed(broker, request, access.CREATE, access.TOPIC, topic.name):
            code, message = _create(broker, topic, body.validate_only)
        else:
            code, message = ErrorCode.topic_authorization_failed, f"not authorized to create topic {topic.name}"
        result: dict[str, Any] = {
            "name": topic.name,
            "error_code": code,
            "error_message": message,
            "num_partitions": -1,
            "replication_factor": -1,
            "configs": [],
        }
        if code == ErrorCode.none and request.api_version >= 5:
            result.update(_created(broker, topic, body.validate_only))
        results.append(result)
    return {"throttle_time": 0, "topics": results}


def _created(broker: BrokerContext, topic: Any, validate_only: bool) -> dict[str, Any]:
    """What CreateTopics v5+ says of a topic it created (or would create, validate_only)."""
    configs = normalize_topic_configs({config.name: config.value for config in topic.configs})
    controller = broker.replicas.controller
    partitions = controller.num_partitions if topic.num_partitions == -1 else topic.num_partitions
    factor = controller.default_replication_factor if topic.replication_factor == -1 else topic.replication_factor
    if topic.assignments:
        partitions, factor = len(topic.assignments), len(topic.assignments[0].broker_ids)
    info = None if validate_only else broker.replicas.topics().get(topic.name)
    entries = topic_config_entries(broker, configs)
    return {
        "num_partitions": info.partitions if info is not None else partitions,
        "replication_factor": factor,
        "topic_id": info.topic_id if info is not None else None,
        "configs": [
            {key: entry[key] for key in ("name", "value", "read_only", "config_source", "is_sensitive")}
            for entry in entries
        ],
    }


def _create(broker: BrokerContext, topic: Any, validate_only: bool) -> tuple[int, str | None]:
    if is_internal_topic(topic.name):
        return ErrorCode.invalid_topic_exception, (
            f"topic names starting with '__' are reserved for the broker's internal topics: {topic.name!r}"
        )
    if topic.assignments:
        if topic.num_partitions != -1 or topic.replication_factor != -1:
            return ErrorCode.invalid_request, (
                "Both numPartitions or replicationFactor and replicasAssignments were set. "
                "Both cannot be used at the same time."
            )
        indexes = sorted(assignment.partition_index for assignment in topic.assignments)
        if indexes != list(range(len(indexes))):
            return ErrorCode.invalid_replica_assignment, (
                f"Unexpected partition indexes {indexes}: the manual partition "
                "assignment must number its partitions 0, 1, 2, ..."
            )
        for assignment in topic.assignments:
            error = _replica_error(broker, assignment.broker_ids)
            if error:
                return ErrorCode.invalid_replica_assignment, error
    nulls = [config.name for config in topic.configs if config.value is None]
    if nulls:
        return ErrorCode.invalid_config, f"Null value not supported for topic configs: {', '.join(nulls)}"
    try:
        broker.replicas.create_topic(
            topic.name,
            topic.num_partitions,
            topic.replication_factor,
            {config.name: config.value for config in topic.configs},
            validate_only,
            assignments=[assignment.broker_ids for assignment in sorted(topic.assignments, key=_index)]
            if topic.assignments
            else None,
        )
    except StorageError as error:
        return error.error_code, str(error)
    if not validate_only:
        logger.info("created topic %s", topic.name)
    return ErrorCode.none, None


def _index(assignment: Any) -> int:
    return int(assignment.partition_index)


def handle_delete(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    if request.api_version >= 6:
        asked = [(topic.name, topic.topic_id) for topic in body.topics]
    else:
        asked = [(name, None) for name in body.topic_names]
    responses = []
    for name, tid in asked:
        if name is None:
            name = broker.replicas.topic_name(tid)
            if name is None:
                responses.append(
                    {
                        "name": None,
                        "topic_id": tid,
                        "error_code": ErrorCode.unknown_topic_id,
                        "error_message": f"no topic has the id {tid}",
                    }
                )
                continue
        tid = topic_id(broker, name)
        if not access.allowed(broker, request, access.DELETE, access.TOPIC, name):
            responses.append({"name": name, "topic_id": tid, "error_code": ErrorCode.topic_authorization_failed})
            continue
        if is_internal_topic(name):  # the broker's state (groups, transactions): not the client's to delete
            responses.append(
                {
                    "name": name,
                    "topic_id": tid,
                    "error_code": ErrorCode.invalid_request,
                    "error_message": f"{name} is an internal topic of the broker and cannot be deleted",
                }
            )
            continue
        code, message = ErrorCode.none, None
        try:
            broker.replicas.delete_topic(name)  # through the controller: every replica goes
            logger.info("deleted topic %s", name)
        except StorageError as error:
            code, message = error.error_code, str(error)
        responses.append({"name": name, "topic_id": tid, "error_code": code, "error_message": message})
    broker.notifier.notify()  # parked fetches on a deleted topic answer at once
    return {"throttle_time": 0, "responses": responses}


def _replica_error(broker: BrokerContext, broker_ids: Any) -> str | None:
    """Why a partition's replica list cannot be placed, or None: it must name distinct registered
    brokers."""
    image = broker.replicas.image
    registered = sorted(image.brokers) if image is not None else []
    if not broker_ids:
        return "The manual partition assignment includes an empty replica list."
    if len(set(broker_ids)) != len(broker_ids):
        return f"The manual partition assignment includes the broker ids {list(broker_ids)} more than once."
    unknown = [broker_id for broker_id in broker_ids if broker_id not in registered]
    if unknown:
        return (
            f"The manual partition assignment includes broker {unknown[0]}, but no such broker is registered "
            f"(the registered brokers are {', '.join(map(str, registered))})."
        )
    return None


def _assignments_error(broker: BrokerContext, topic: Any) -> str | None:
    """CreatePartitions: one replica list per partition added, each naming existing brokers."""
    info = broker.replicas.topics().get(topic.name)
    added = topic.count - (info.partitions if info is not None else 0)
    if info is not None and len(topic.assignments) != added:
        return f"Increasing the number of partitions by {added} but {len(topic.assignments)} assignments provided."
    for broker_ids in (assignment.broker_ids for assignment in topic.assignments):
        error = _replica_error(broker, broker_ids)
        if error:
            return error
    return None


def handle_create_partitions(broker: BrokerContext, request: Any) -> dict[str, Any]:
    """CreatePartitions (37): grow topics to the partition counts asked for. New partitions start
    empty; consumers and the pylog source read them from their beginning."""
    body = request.body
    names = [topic.name for topic in body.topics]
    results = []
    for topic in body.topics:
        code, message = ErrorCode.none, None
        try:
            if names.count(topic.name) > 1:
                code, message = ErrorCode.invalid_request, f"topic {topic.name!r} appears more than once in the request"
            elif not access.allowed(broker, request, access.ALTER, access.TOPIC, topic.name):
                code, message = ErrorCode.topic_authorization_failed, f"not authorized to alter topic {topic.name}"
            elif is_internal_topic(topic.name):
                code, message = ErrorCode.unknown_topic_or_partition, f"topic {topic.name!r} does not exist"
            elif topic.assignments and (error := _assignments_error(broker, topic)):
                code, message = ErrorCode.invalid_replica_assignment, error
            else:  # the controller places the new partitions' replicas (or takes the assignments)
                broker.replicas.add_partitions(
                    topic.name,
                    topic.count,
                    body.validate_only,
                    assignments=[assignment.broker_ids for assignment in topic.assignments or ()] or None,
                )
                if not body.validate_only:
                    logger.info("topic %s grew to %d partitions", topic.name, topic.count)
        except StorageError as error:
            code, message = error.error_code, str(error)
        results.append({"name": topic.name, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "results": results}
