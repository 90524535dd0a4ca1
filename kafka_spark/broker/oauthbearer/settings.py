"""An OAUTHBEARER listener's settings under Kafka's server.properties names.

Kafka configures the listener ``<l>`` (lower-cased in the keys) with::

    sasl.enabled.mechanisms=OAUTHBEARER
    listener.name.<l>.oauthbearer.sasl.jaas.config=\\
        org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required \\
        unsecuredValidatorRequiredScope="kafka" ;
    listener.name.<l>.oauthbearer.sasl.server.callback.handler.class=<validator class>
    listener.name.<l>.oauthbearer.connections.max.reauth.ms=600000
    sasl.oauthbearer.jwks.endpoint.url=...            (also with the listener.name.<l>.oauthbearer. prefix)

The callback handler class picks the validator: Kafka's
``OAuthBearerUnsecuredValidatorCallbackHandler`` (the default; its options are the JAAS line's
``unsecuredValidator*``), Kafka's ``OAuthBearerValidatorCallbackHandler`` (signed JWTs against
``sasl.oauthbearer.jwks.endpoint.url``, jwks.py), or a Python class named ``package.module:Class``
(validator.py), built with :func:`listener_configs`: every ``sasl.oauthbearer.*`` key (a
listener-prefixed one wins) and the JAAS line's options.

The broker's own login settings of Kafka (``sasl.login.*``, ``sasl.oauthbearer.token.endpoint.url``,
the JAAS line's ``unsecuredLogin*``, clientId and clientSecret) are what a Kafka broker uses to
reach other brokers; a single pylog node has none to reach, so they are read without effect.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Mapping
from typing import Any

#: Kafka's validator of unsecured tokens, and of signed JWTs against a JWKS (both package names
#: Kafka has used; Databricks' shaded ones too).
UNSECURED_HANDLER = "OAuthBearerUnsecuredValidatorCallbackHandler"
JWKS_HANDLER = "OAuthBearerValidatorCallbackHandler"
_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"

#: The validator's keys, with or without the listener prefix (jwks.py reads them).
VALIDATOR_KEYS = frozenset(
    {
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.sub.claim.name",
        "sasl.oauthbearer.scope.claim.name",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.jwt.validator.class",
    }
)
#: A Kafka broker's own login (to other brokers): read without effect on one pylog node.
LOGIN_KEYS = frozenset(
    {
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.retry.backoff.ms",
        "sasl.login.retry.backoff.max.ms",
        "sasl.oauthbearer.token.endpoint.url",
        "sasl.oauthbearer.scope",
        "sasl.oauthbearer.client.credentials.client.id",
        "sasl.oauthbearer.client.credentials.client.secret",
        "sasl.oauthbearer.jwt.retriever.class",
        "sasl.oauthbearer.header.urlencode",
    }
)
_LISTENER_KEYS = frozenset({"sasl.jaas.config", "sasl.server.callback.handler.class", "connections.max.reauth.ms"})
_PREFIXED = re.compile(r"listener\.name\.([a-z0-9_]+)\.oauthbearer\.(.+)")


class OAuthBearerConfigError(ValueError):
    """An OAUTHBEARER setting that cannot be applied; the message names the key and the fix."""


def is_oauthbearer_key(key: str) -> bool:
    """A key this module reads (the caller checks the rest)."""
    return key in VALIDATOR_KEYS or key in LOGIN_KEYS or _PREFIXED.fullmatch(key) is not None


def listener_configs(properties: Mapping[str, str], listener: str) -> dict[str, str]:
    """The OAUTHBEARER settings of ``listener`` with its prefix taken off (a prefixed key wins over
    the plain one), plus the options of its JAAS line under their own names."""
    prefix = f"listener.name.{listener.lower()}.oauthbearer."
    configs = {key: value for key, value in properties.items() if key in VALIDATOR_KEYS or key in LOGIN_KEYS}
    for key, value in properties.items():
        match = _PREFIXED.fullmatch(key)
        if match is None:
            continue
        if not key.startswith(prefix):
            continue  # another listener's: pylog serves one
        suffix = match.group(2)
        if suffix not in VALIDATOR_KEYS and suffix not in LOGIN_KEYS and suffix not in _LISTENER_KEYS:
            known = sorted(VALIDATOR_KEYS | _LISTENER_KEYS)
            raise OAuthBearerConfigError(
                f"{key}: unknown OAUTHBEARER setting {suffix!r}; pylog reads {', '.join(known)}"
            )
        configs[suffix] = value
    jaas = configs.pop("sasl.jaas.config", None)
    if jaas is not None:
        from kafka_spark.common.jaas import JaasConfigError, parse_jaas

        try:
            module, options = parse_jaas(jaas, f"{prefix}sasl.jaas.config")
        except JaasConfigError as error:
            raise OAuthBearerConfigError(str(error)) from None
        if module != _LOGIN_MODULE:
            raise OAuthBearerConfigError(f"{prefix}sasl.jaas.config must name {_LOGIN_MODULE}, not {module}")
        for name, value in options.items():
            configs.setdefault(name, value)
    return configs


def validator_from_configs(configs: Mapping[str, str], setting: str) -> Any:
    """The validator the callback handler class names (``setting`` is its key, for errors)."""
    handler = configs.get("sasl.server.callback.handler.class", "").strip()
    simple_name = handler.removeprefix("kafkashaded.").rsplit(".", 1)[-1]
    if not handler or (
        handler.removeprefix("kafkashaded.").startswith("org.apache.kafka.") and simple_name == UNSECURED_HANDLER
    ):
        from kafka_spark.broker.oauthbearer.unsecured import UnsecuredJwsValidator

        try:
            return UnsecuredJwsValidator.from_jaas_options(configs)
        except ValueError as error:
            raise OAuthBearerConfigError(str(error)) from None
    if handler.removeprefix("kafkashaded.").startswith("org.apache.kafka.") and simple_name == JWKS_HANDLER:
        from kafka_spark.broker.oauthbearer.jwks import JwksValidator

        try:
            return JwksValidator.from_configs(configs)
        except (ValueError, ImportError) as error:
            raise OAuthBearerConfigError(str(error)) from None
    if handler.startswith(("org.apache.kafka.", "kafkashaded.")):
        raise OAuthBearerConfigError(
            f"{setting}={handler}: pylog validates tokens with Kafka's {UNSECURED_HANDLER} or {JWKS_HANDLER}, "
            "or a Python class named package.module:Class"
        )
    return _load_class(handler, setting)(dict(configs))


def _load_class(name: str, setting: str) -> Any:
    module_name, sep, attribute = name.partition(":")
    if not sep:
        module_name, _, attribute = name.rpartition(".")
    try:
        found = getattr(importlib.import_module(module_name), attribute) if module_name and attribute else None
    except ImportError as error:
        raise OAuthBearerConfigError(f"{setting}={name}: cannot import {module_name} ({error})") from None
    except AttributeError:
        found = None
    if found is None:
        raise OAuthBearerConfigError(f"{setting}={name}: no such class; name a validator class as package.module:Class")
    return found
