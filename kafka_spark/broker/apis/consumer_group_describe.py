"""ConsumerGroupDescribe (69, v0-1; kafka-consumer-groups --describe, AdminClient.describeConsumerGroups):
a KIP-848 consumer group's state, epochs, assignor and members with their current and target
assignments. A group that is not a consumer group (a classic one, or none) is GROUP_ID_NOT_FOUND
with a message, as Kafka answers it; Kafka's admin clients then describe it with DescribeGroups.
With an authorizer: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED), and
``include_authorized_operations`` answered.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    groups = []
    for group_id in body.group_ids:
        described: dict[str, Any] = {
            "error_code": ErrorCode.none,
            "error_message": None,
            "group_id": group_id,
            "group_state": "",
            "group_epoch": -1,
            "assignment_epoch": -1,
            "assignor_name": "",
            "members": [],
            "authorized_operations": access.NOT_REQUESTED,
        }
        coordinator = broker.groups
        if not access.allowed(broker, request, access.DESCRIBE, access.GROUP, group_id):
            described["error_code"] = ErrorCode.group_authorization_failed
        elif coordinator.owner_error(group_id):
            described["error_code"] = coordinator.owner_error(group_id)
        elif coordinator.group_type(group_id) != "consumer":
            known = group_id in coordinator.group_ids()
            described.update(
                error_code=ErrorCode.group_id_not_found,
                error_message=f"Group {group_id} is not a consumer group." if known else f"Group {group_id} not found.",
            )
        else:
            described.update(coordinator.consumer.describe(group_id))
            described["authorized_operations"] = access.authorized_operations(
                broker, request, access.GROUP, group_id, body.include_authorized_operations
            )
        groups.append(described)
    return {"throttle_time": 0, "groups": groups}
