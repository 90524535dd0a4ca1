"""Token functions for ``kafka.sasl.oauthbearer.token.provider`` in tests. Spark's Python workers
import them by name, as they would a user's module (the repository root is on their path).

Each token is an unsigned JWT (Kafka's unsecured validator, and pylog's broker with unsecured
validation, check its ``sub`` and ``exp``); options choose the subject and the lifetime.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

from tests.support.token_endpoint import unsigned_jwt

NOT_CALLABLE = "a token function reference must name a function"


def fixed(options: Mapping[str, str]) -> tuple[str, float]:
    """A token for ``options['sub']`` (default ``fn-user``) living ``options['lifetime']`` s (default 3600)."""
    now = int(time.time())
    lifetime = int(options.get("lifetime", "3600"))
    claims = {"sub": options.get("sub", "fn-user"), "iat": now, "exp": now + lifetime}
    return unsigned_jwt(claims), float(now + lifetime)


def with_principal(options: Mapping[str, str]) -> tuple[str, float, str, dict[str, str]]:
    token, expiry = fixed(options)
    return token, expiry, options.get("sub", "fn-user"), {"traceId": "t-1"}


def in_milliseconds(options: Mapping[str, str]) -> tuple[str, float]:
    token, expiry = fixed(options)
    return token, expiry * 1000


def failing(options: Mapping[str, str]) -> tuple[str, float]:
    """Fails as an identity provider client would, quoting what it was given (a test checks that
    secrets in the options are masked)."""
    raise RuntimeError(f"identity provider said no to secret {options.get('clientSecret')}")


def expired_claim(options: Mapping[str, str]) -> tuple[str, float]:
    """A token the broker refuses (its ``exp`` claim is past) that the client believes valid."""
    now = int(time.time())
    return unsigned_jwt({"sub": "late", "iat": now - 120, "exp": now - 60}), float(now + 3600)


def msk_with_fixed_keys(options: Mapping[str, str]) -> tuple[str, float]:
    """The AWS MSK IAM signer with a stubbed credential source: the fixed access key and secret
    the test's broker knows, given as environment variables in the process that builds the
    client (Spark's Python workers do not see the test's environment), then pylog's MSK token
    function as a user's job runs it."""
    from kafka_spark.client.aws_msk import msk_iam_token

    os.environ["AWS_ACCESS_KEY_ID"] = options["stubAccessKeyId"]
    os.environ["AWS_SECRET_ACCESS_KEY"] = options["stubSecretAccessKey"]
    os.environ.pop("AWS_SESSION_TOKEN", None)
    return msk_iam_token({k: v for k, v in options.items() if not k.startswith("stub")})
