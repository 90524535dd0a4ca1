"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), v0 (KIP-554;
kafka-configs --describe / --alter --add-config 'SCRAM-SHA-256=[iterations=...,password=...]'
--entity-type users; AdminClient's describe/alter_user_scram_credentials) on the SCRAM
credentials kept in the broker's metadata (credentials.py).

Describing needs DESCRIBE on the cluster, altering ALTER (31 CLUSTER_AUTHORIZATION_FAILED); without
an authorizer both are allowed. Per user, as Kafka answers: RESOURCE_NOT_FOUND (91) for a user or
credential that does not exist, DUPLICATE_RESOURCE (92) for a user named twice in a request (even
for two mechanisms: Kafka alters one credential of a user per request),
UNSUPPORTED_SASL_MECHANISM (33) for a mechanism other than SCRAM-SHA-256/512,
UNACCEPTABLE_CREDENTIAL (93) for iterations outside 4096-16384 or an empty salt or user name. A
user's changes apply together or not at all.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis import access
from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.credentials import MECHANISM_CODES, MECHANISM_NAMES, CredentialError, validate


def handle_describe(broker: BrokerContext, request: Any) -> dict[str, Any]:
    response: dict[str, Any] = {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": []}
    if not access.allowed_on_cluster(broker, request, access.DESCRIBE):
        return {
            **response,
            "error_code": ErrorCode.cluster_authorization_failed,
            "error_message": "not authorized to DESCRIBE the cluster",
        }
    stored = broker.credentials.users()
    asked = [user.name for user in request.body.users or ()]
    for user in asked or sorted(stored):
        result: dict[str, Any] = {
            "user": user,
            "error_code": ErrorCode.none,
            "error_message": None,
            "credential_infos": [],
        }
        if asked.count(user) > 1:
            result.update(
                error_code=ErrorCode.duplicate_resource, error_message=f"user {user} is asked for more than once"
            )
        elif user not in stored:
            result.update(
                error_code=ErrorCode.resource_not_found,
                error_message=f"Attempt to describe a user credential that does not exist: {user}",
            )
        else:
            result["credential_infos"] = [
                {"mechanism": MECHANISM_CODES[mechanism], "iterations": iterations}
                for mechanism, iterations in sorted(stored[user].items())
            ]
        if result not in response["results"]:
            response["results"].append(result)
    return response


def handle_alter(broker: BrokerContext, request: Any) -> dict[str, Any]:
    body = request.body
    changes = [(entry.name, entry.mechanism, None) for entry in body.deletions] + [
        (entry.name, entry.mechanism, entry) for entry in body.upsertions
    ]
    users = list(dict.fromkeys(name for name, _, _ in changes))
    if not access.allowed_on_cluster(broker, request, access.ALTER):
        return {
            "throttle_time": 0,
            "results": [
                {
                    "user": user,
                    "error_code": ErrorCode.cluster_authorization_failed,
                    "error_message": "not authorized to ALTER the cluster",
                }
                for user in users
            ],
        }
    results = []
    for user in users:
        mine = [(code, upsert) for name, code, upsert in changes if name == user]
        error = _check(broker, user, mine)
        if error is None:
            for code, upsert in mine:
                mechanism = MECHANISM_NAMES[code]
                if upsert is None:
                    broker.credentials.delete(user, mechanism)
                else:
                    broker.credentials.upsert(user, mechanism, upsert.iterations, upsert.salt, upsert.salted_password)
        code, message = error if error is not None else (0, None)
        results.append({"user": user, "error_code": code, "error_message": message})
    return {"throttle_time": 0, "results": results}


def _check(broker: BrokerContext, user: str, changes: list[tuple[int, Any]]) -> tuple[int, str] | None:
    """The error of a user's changes, checked before any of them applies."""
    if not user:
        return ErrorCode.unacceptable_credential, "a SCRAM credential needs a user name"
    if len(changes) > 1:  # Kafka's rule, even for two different mechanisms
        return ErrorCode.duplicate_resource, (
            f"user {user} is named {len(changes)} times in the request; a request may alter one "
            "credential of a user: send one request per mechanism"
        )
    for code, upsert in changes:
        mechanism = MECHANISM_NAMES.get(code)
        if mechanism is None:
            return ErrorCode.unsupported_sasl_mechanism, (
                f"unknown SCRAM mechanism {code}; use 1 (SCRAM-SHA-256) or 2 (SHA-512)"
            )
        if upsert is None and broker.credentials.get(mechanism, user) is None:
            return ErrorCode.resource_not_found, (
                f"Attempt to delete a user credential that does not exist: {user} {mechanism}"
            )
        if upsert is not None:
            try:
                validate(user, mechanism, upsert.iterations, upsert.salt, upsert.salted_password)
            except CredentialError as error:
                return ErrorCode.unacceptable_credential, str(error)
    return None
