"""ApiVersions (18): the versions this broker serves, from protocol/versions.py (with the SASL
keys on a SASL listener)."""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.protocol.versions import SASL_VERSIONS, SUPPORTED_VERSIONS


def handle(broker: Any, request: Any) -> dict[str, Any]:
    served = {**SUPPORTED_VERSIONS, **(SASL_VERSIONS if broker.config.sasl_users else {})}
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(served.items())
        ],
        "throttle_time": 0,
    }
