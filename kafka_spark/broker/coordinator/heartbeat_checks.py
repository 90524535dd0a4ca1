"""Kafka's checks of a ConsumerGroupHeartbeat's fields (KIP-848), before the consumer protocol
(consumer_group.py) acts on it: INVALID_REQUEST with Kafka's reason for a field missing or out of
place, UNSUPPORTED_ASSIGNOR for an assignor this coordinator has not, INVALID_REGULAR_EXPRESSION
for a subscription regex RE2/J (which Kafka compiles it with) would refuse. Pure.
"""

from __future__ import annotations

import re
from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.coordinator.assignors import ASSIGNORS

LEAVE_EPOCH = -1
STATIC_LEAVE_EPOCH = -2


class HeartbeatError(Exception):
    """A heartbeat refused with ``error_code``, and the reason."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code


def validate_heartbeat(body: Any) -> None:
    """Kafka's checks of a heartbeat's fields (INVALID_REQUEST with the reason)."""
    if not body.group_id:
        raise HeartbeatError(ErrorCode.invalid_request, "GroupId can't be empty.")
    epoch = body.member_epoch
    if epoch == 0:
        if body.rebalance_timeout.total_seconds() < 0:
            raise HeartbeatError(ErrorCode.invalid_request, "RebalanceTimeoutMs must be provided in first request.")
        if body.topic_partitions is None or any(topic.partitions for topic in body.topic_partitions):
            raise HeartbeatError(ErrorCode.invalid_request, "TopicPartitions must be empty when (re-)joining.")
        if body.subscribed_topic_names is None and subscribed_regex(body) is None:
            raise HeartbeatError(
                ErrorCode.invalid_request, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request."
            )
    elif epoch == STATIC_LEAVE_EPOCH:
        if body.instance_id is None:
            raise HeartbeatError(ErrorCode.invalid_request, "InstanceId can't be null when leaving with epoch -2.")
    elif epoch != LEAVE_EPOCH and epoch < 0:
        raise HeartbeatError(ErrorCode.invalid_request, f"MemberEpoch {epoch} is not valid.")
    if epoch != 0 and not body.member_id:
        raise HeartbeatError(ErrorCode.invalid_request, "MemberId can't be empty.")
    if body.server_assignor is not None and body.server_assignor not in ASSIGNORS:
        raise HeartbeatError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {body.server_assignor!r} is not supported; supported assignors: {', '.join(ASSIGNORS)}",
        )
    regex = subscribed_regex(body)
    if regex:
        refusal = re2_refusal(regex)
        if refusal is not None:
            raise HeartbeatError(
                ErrorCode.invalid_regular_expression,
                f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {refusal}.",
            )


#: Python ``re`` constructs that RE2 (Kafka compiles subscription regexes with RE2/J) does not have,
#: by the parser's opcode name.
_NOT_RE2 = {
    "GROUPREF": "backreferences are not supported",
    "GROUPREF_EXISTS": "conditional groups are not supported",
    "ASSERT": "lookahead and lookbehind are not supported",
    "ASSERT_NOT": "lookahead and lookbehind are not supported",
    "ATOMIC_GROUP": "atomic groups are not supported",
    "POSSESSIVE_REPEAT": "possessive quantifiers are not supported",
}

_NOT_RE2_FLAGS = re.VERBOSE | re.ASCII | re.LOCALE


def re2_refusal(pattern: str) -> str | None:
    """Why RE2/J would refuse ``pattern`` (None: it compiles there too, as far as Python's parser
    shows). Kafka's coordinator compiles a SubscribedTopicRegex with RE2/J and refuses what does not
    compile; Python's ``re`` accepts more (backreferences, lookaround, atomic groups, possessive
    quantifiers, ``\\Z``), so those are refused here as Kafka refuses them."""
    from re import _parser  # type: ignore[attr-defined]

    try:
        parsed = _parser.parse(pattern)
    except re.error as error:
        return str(error)
    if parsed.state.flags & _NOT_RE2_FLAGS:
        return "the flags x, a and L are not supported (RE2 has i, m, s and U)"
    pending: list[Any] = [parsed]
    while pending:
        item = pending.pop()
        if isinstance(item, _parser.SubPattern):
            pending.extend(item.data)
        elif isinstance(item, (list, tuple)):
            if len(item) == 2 and str(item[0]) in _NOT_RE2:
                return _NOT_RE2[str(item[0])]
            if len(item) == 2 and str(item[0]) == "SUBPATTERN" and item[1][1] & _NOT_RE2_FLAGS:
                return "the flags x, a and L are not supported (RE2 has i, m, s and U)"
            if len(item) == 2 and str(item[0]) == "AT" and str(item[1]) == "AT_END_STRING":
                return "\\Z is not supported (RE2 writes the end of the text \\z)"
            pending.extend(item)
    return None


def subscribed_regex(body: Any) -> str | None:
    """A heartbeat's SubscribedTopicRegex (v0 has no such field: None)."""
    return getattr(body, "subscribed_topic_regex", None)
