"""SASL/OAUTHBEARER on the broker's listener: the RFC 7628 exchange (exchange.py), the pluggable
token validator (validator.py), Kafka's unsecured JWS validation (unsecured.py), signed JWTs
against a JWKS (jwks.py) and the listener's Kafka settings (settings.py). sasl.py runs it beside
PLAIN and SCRAM."""

from kafka_spark.broker.oauthbearer.jwks import JwksValidator
from kafka_spark.broker.oauthbearer.unsecured import UnsecuredJwsValidator, unsecured_token
from kafka_spark.broker.oauthbearer.validator import OAuthBearerToken, OAuthBearerValidationError, OAuthBearerValidator

__all__ = [
    "JwksValidator",
    "OAuthBearerToken",
    "OAuthBearerValidationError",
    "OAuthBearerValidator",
    "UnsecuredJwsValidator",
    "unsecured_token",
]
