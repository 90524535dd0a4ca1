"""A broker's own OAUTHBEARER login, to the other brokers of its cluster (a follower fetching from
its leader, a coordinator writing transaction markers), as Kafka's broker logs in over its
inter-broker listener with ``sasl.login.callback.handler.class`` or the JAAS line's
``unsecuredLoginStringClaim_sub``.

The token comes from ``sasl_oauthbearer_token_provider`` (a callable returning a token, e.g. a
client-credentials grant at the identity provider: it runs in a worker thread, never on the
event loop), or, on a listener validating unsecured tokens, is an unsecured token for the
principal ``broker`` (with the scope the validator requires). With an authorizer, that principal
needs to be a super user (``super.users``), as Kafka's broker principal is.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from kafka_spark.broker.oauthbearer.unsecured import UnsecuredJwsValidator, unsecured_token

#: The principal of a broker's unsecured login.
BROKER_PRINCIPAL = "broker"


class BrokerLogin:
    """The first (and only) message of a broker's OAUTHBEARER exchange with another broker."""

    mechanism = "OAUTHBEARER"

    def __init__(self, token_provider: Callable[[], str]) -> None:
        self._token_provider = token_provider

    async def initial_response(self) -> bytes:
        token = await asyncio.to_thread(self._token_provider)
        return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


def broker_login(config: Any) -> BrokerLogin | None:
    """How a broker with ``config`` logs in to the others, or None on a listener without SASL.
    ValueError when its listener takes OAUTHBEARER tokens it has no way to get."""
    if not config.sasl_enabled:
        return None
    if "OAUTHBEARER" not in config.sasl_mechanisms:
        raise ValueError(
            "the brokers of a cluster log in to each other with OAUTHBEARER: add it to sasl_mechanisms "
            "(a cluster whose listener takes PLAIN or SCRAM only cannot replicate)"
        )
    provider = config.sasl_oauthbearer_token_provider
    if provider is not None:
        return BrokerLogin(provider)
    validator = config.sasl_oauthbearer_validator
    if isinstance(validator, UnsecuredJwsValidator):
        scope = list(validator.required_scope) or None
        return BrokerLogin(
            lambda: unsecured_token(BROKER_PRINCIPAL, scope=scope, principal_claim_name=validator.principal_claim_name)
        )
    raise ValueError(
        f"the brokers of a cluster log in to each other, and their listener validates tokens with "
        f"{type(validator).__name__}: give sasl_oauthbearer_token_provider, a callable returning a token it accepts "
        "for the brokers' principal (e.g. OidcProvider.token_provider(client_id, secret))"
    )
