"""DescribeAcls (29), CreateAcls (30) and DeleteAcls (31), v1-3 (kafka-acls, AdminClient's
describe_acls / create_acls / delete_acls) on the authorizer's ACLs (authorizer.py).

Without an authorizer they answer SECURITY_DISABLED (54), as Kafka does. Describing needs
DESCRIBE on the cluster, creating and deleting ALTER (31 CLUSTER_AUTHORIZATION_FAILED). An ACL that
cannot be stored (no resource type, a pattern other than LITERAL or PREFIXED, a principal not
TYPE:NAME, an operation that does not apply to the resource type...) is INVALID_REQUEST (42) with
the reason; the others of the request are created. Changes are persisted before the answer.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.authorizer import Acl, AclFilter, InvalidAcl, Operation, PatternType, Permission, ResourceType

_DISABLED = "No Authorizer is configured on the broker: set authorizer.class.name"


def _acl(entry: Any) -> Acl:
    try:
        return Acl(
            ResourceType(entry.resource_type),
            entry.resource_name,
            PatternType(entry.resource_pattern_type),
            entry.principal,
            entry.host,
            Operation(entry.operation),
            Permission(entry.permission_type),
        ).validate()
    except ValueError as error:  # an unknown enum value, or InvalidAcl
        raise InvalidAcl(str(error)) from None


def _filter(entry: Any) -> AclFilter:
    try:
        return AclFilter(
            ResourceType(entry.resource_type_filter),
            entry.resource_name_filter,
            PatternType(entry.pattern_type_filter),
            entry.principal_filter,
            entry.host_filter,
            Operation(entry.operation),
            Permission(entry.permission_type),
        ).validate()
    except ValueError as error:
        raise InvalidAcl(str(error)) from None


def _described(acl: Acl) -> dict[str, Any]:
    return {"principal": acl.principal, "host": acl.host, "operation": acl.operation, "permission_type": acl.permission}


def handle_describe(broker: BrokerContext, request: Any) -> dict[str, Any]:
    response: dict[str, Any] = {
        "throttle_time": 0,
        "error_code": ErrorCode.none,
        "error_message": None,
        "resources": [],
    }
    if broker.authorizer is None:
        return {**response, "error_code": ErrorCode.security_disabled, "error_message": _DISABLED}
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE):
        return {**response, "error_code": ErrorCode.cluster_authorization_failed}
    try:
        acl_filter = _filter(request.body)
    except InvalidAcl as error:
        return {**response, "error_code": ErrorCode.invalid_request, "error_message": str(error)}
    resources: dict[tuple[int, str, int], list[dict[str, Any]]] = {}
    for acl in broker.authorizer.acls(acl_filter):
        resources.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(_described(acl))
    response["resources"] = [
        {"resource_type": kind, "resource_name": name, "pattern_type": pattern, "acls": acls}
        for (kind, name, pattern), acls in resources.items()
    ]
    return response


def handle_create(broker: BrokerContext, request: Any) -> dict[str, Any]:
    creations = request.body.creations
    if broker.authorizer is None:
        code, message = ErrorCode.security_disabled, _DISABLED
    elif not access.allowed_on_cluster(broker, request, access.ALTER):
        code, message = ErrorCode.cluster_authorization_failed, None
    else:
        results: list[dict[str, Any]] = []
        valid = []
        for entry in creations:
            try:
                valid.append(_acl(entry))
                results.append({"error_code": ErrorCode.none, "error_message": None})
            except InvalidAcl as error:
                results.append({"error_code": ErrorCode.invalid_request, "error_message": str(error)})
        broker.authorizer.add(valid)
        return {"throttle_time": 0, "results": results}
    return {"throttle_time": 0, "results": [{"error_code": code, "error_message": message} for _ in creations]}


def handle_delete(broker: BrokerContext, request: Any) -> dict[str, Any]:
    filters = request.body.filters
    if broker.authorizer is None or not access.allowed_on_cluster(broker, request, access.ALTER):
        code, message = (
            (ErrorCode.security_disabled, _DISABLED)
            if broker.authorizer is None
            else (ErrorCode.cluster_authorization_failed, None)
        )
        return {
            "throttle_time": 0,
            "filter_results": [{"error_code": code, "error_message": message, "matching_acls": []} for _ in filters],
        }
    results = []
    for entry in filters:
        try:
            removed = broker.authorizer.remove(_filter(entry))
        except InvalidAcl as error:
            results.append({"error_code": ErrorCode.invalid_request, "error_message": str(error), "matching_acls": []})
            continue
        results.append(
            {
                "error_code": ErrorCode.none,
                "error_message": None,
                "matching_acls": [
                    {
                        "error_code": ErrorCode.none,
                        "error_message": None,
                        "resource_type": acl.resource_type,
                        "resource_name": acl.resource_name,
                        "pattern_type": acl.pattern_type,
                        **_described(acl),
                    }
                    for acl in removed
                ],
            }
        )
    return {"throttle_time": 0, "filter_results": results}
