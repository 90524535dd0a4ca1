"""ApiVersions (18): the versions this broker serves, from protocol/versions.py (with the SASL
keys on a SASL listener), and from v3 its features (``transaction.version`` 2: KIP-890; finalized at 0
on the brokers of a cluster, see CLUSTER_FINALIZED).

v5 (KIP-1242) lets a client say which cluster and node it means to reach; a broker that is not
that node answers REBOOTSTRAP_REQUIRED, and the client bootstraps again instead of talking to the
wrong cluster (a reused address after a restart elsewhere, a stale DNS entry).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from kafka_spark.broker.apis.context import BrokerContext
from kafka_spark.broker.protocol.versions import (
    CLUSTER_FINALIZED,
    FEATURES,
    SASL_VERSIONS,
    SUPPORTED_VERSIONS,
)

#: The epoch of the finalized features: they never change while the broker runs.
_FEATURES_EPOCH = 0


def handle(broker: BrokerContext, request: Any) -> dict[str, Any]:
    served = {**SUPPORTED_VERSIONS, **(SASL_VERSIONS if broker.config.sasl_enabled else {})}
    return {
        "error_code": _wrong_node(broker.config, request.body),
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in sorted(served.items())
        ],
        "throttle_time": 0,
        # v3 answers omit features whose minimum is 0: older clients cannot parse them (KAFKA-17492).
        "supported_features": [
            {"name": name, "min_version": low, "max_version": high}
            for name, (low, high, _) in FEATURES.items()
            if low > 0 or request.api_version >= 4
        ],
        "finalized_features_epoch": _FEATURES_EPOCH,
        "finalized_features": [
            {"name": name, "min_version_level": level, "max_version_level": level}
            for name, level in _finalized(broker).items()
            if level > 0
        ],
    }


def _finalized(broker: BrokerContext) -> dict[str, int]:
    levels = {name: level for name, (_, _, level) in FEATURES.items()}
    # The one place where the size of the cluster shows: transaction protocol v2 needs each
    # partition's leader to add the partition to the transaction at its coordinator, a request
    # between brokers pylog does not send. A broker alone in its cluster is both, and finalizes it.
    if not broker.replicas.alone:
        levels.update(CLUSTER_FINALIZED)
    return levels


def _wrong_node(config: Any, body: Any) -> int:
    cluster_id = getattr(body, "cluster_id", None)
    node_id = getattr(body, "node_id", -1)
    if (cluster_id is not None and cluster_id != config.cluster_id) or node_id not in (-1, config.node_id):
        return ErrorCode.rebootstrap_required
    return ErrorCode.none
