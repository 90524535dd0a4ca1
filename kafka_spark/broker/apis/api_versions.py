"""ApiVersions (18): the versions this broker serves, from protocol/versions.py."""

from __future__ import annotations

from typing import Any

from kafka_spark.broker.protocol.versions import SUPPORTED_VERSIONS


def handle(broker: Any, request: Any) -> dict[str, Any]:
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": key, "min_version": low, "max_version": high}
            for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
        ],
        "throttle_time": 0,
    }
