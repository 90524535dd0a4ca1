"""An OAUTHBEARER validator for pylog's broker that checks Amazon MSK IAM tokens the way MSK does,
against a stubbed credential source, so that MSK IAM logins are tested end to end on loopback.

The token aws-msk-iam-sasl-signer-python makes is a SigV4-presigned URL, base64url without
padding: ``https://kafka.<region>.amazonaws.com/?Action=kafka-cluster%3AConnect&X-Amz-Algorithm=
AWS4-HMAC-SHA256&X-Amz-Credential=<key id>/<date>/<region>/kafka-cluster/aws4_request&X-Amz-Date=
...&X-Amz-Expires=900&X-Amz-SignedHeaders=host[&X-Amz-Security-Token=...]&X-Amz-Signature=...
&User-Agent=...``. :class:`MskIamValidator` refuses it unless the action is ``kafka-cluster:Connect``,
the host is the region's, the credential scope is the region's ``kafka-cluster`` service on the
signing date, the signing time is not in the future (5 minutes of skew) and not older than its
``X-Amz-Expires``, the access key is one it knows, and the signature, recomputed with botocore's
SigV4 query signer from that key's secret, is the one in the token. The principal is the key's
IAM identity; the session (KIP-368) ends when the signature expires.

It plugs into the broker through kafka_spark.broker.oauthbearer.validator (``validate``).
"""

from __future__ import annotations

import base64
import calendar
import hmac
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field

from botocore.auth import SigV4QueryAuth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from kafka_spark.broker.oauthbearer import OAuthBearerToken, OAuthBearerValidationError

ACTION = "kafka-cluster:Connect"
SERVICE = "kafka-cluster"
SKEW_S = 300


@dataclass
class MskIamValidator:
    """MSK's check of IAM tokens; ``keys`` maps access key ids to (secret access key, principal)."""

    region: str
    keys: dict[str, tuple[str, str]]
    accepted: list[str] = field(default_factory=list)  # principal per accepted token (tests count refreshes)
    signatures: set[str] = field(default_factory=set)  # distinct tokens seen

    def validate(self, token: str, extensions: Mapping[str, str]) -> OAuthBearerToken:
        try:
            url = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode()
        except ValueError:
            raise OAuthBearerValidationError("not an MSK IAM token (not base64url)") from None
        parts = urllib.parse.urlsplit(url)
        params = dict(urllib.parse.parse_qsl(parts.query, keep_blank_values=True))
        host = f"kafka.{self.region}.amazonaws.com"
        if parts.scheme != "https" or parts.netloc != host or parts.path not in ("", "/"):
            raise OAuthBearerValidationError(f"the token is not signed for {host}")
        if params.get("Action") != ACTION:
            raise OAuthBearerValidationError(f"the token's action is not {ACTION}")
        if params.get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" or params.get("X-Amz-SignedHeaders") != "host":
            raise OAuthBearerValidationError("the token is not a SigV4 presigned request signing the host")
        try:
            key_id, date, region, service, terminator = params["X-Amz-Credential"].split("/")
            signed_at = calendar.timegm(time.strptime(params["X-Amz-Date"], "%Y%m%dT%H%M%SZ"))
            expires = int(params["X-Amz-Expires"])
            signature = params["X-Amz-Signature"]
        except (KeyError, ValueError):
            raise OAuthBearerValidationError("the token lacks SigV4 parameters") from None
        if (region, service, terminator, date) != (self.region, SERVICE, "aws4_request", params["X-Amz-Date"][:8]):
            raise OAuthBearerValidationError(f"the token's credential scope is not {self.region}/{SERVICE}")
        now = time.time()
        if signed_at > now + SKEW_S:
            raise OAuthBearerValidationError("the token is signed in the future")
        if signed_at + expires <= now:
            raise OAuthBearerValidationError("the token's signature has expired")
        if key_id not in self.keys:
            raise OAuthBearerValidationError("the token is signed by an unknown access key")
        secret, principal = self.keys[key_id]
        expected = _signature(
            Credentials(key_id, secret, params.get("X-Amz-Security-Token")),
            self.region,
            host,
            params["X-Amz-Date"],
            expires,
        )
        if not hmac.compare_digest(expected, signature):
            raise OAuthBearerValidationError("the token's signature does not match")
        self.accepted.append(principal)
        self.signatures.add(signature)
        return OAuthBearerToken(
            principal_name=principal, lifetime_ms=(signed_at + expires) * 1000, start_time_ms=signed_at * 1000
        )


def _signature(credentials: Credentials, region: str, host: str, amz_date: str, expires: int) -> str:
    """The SigV4 query signature of ``GET https://host/?Action=kafka-cluster:Connect`` signed at
    ``amz_date``, computed by botocore's signer (its add_auth with the token's signing time)."""
    auth = SigV4QueryAuth(credentials, SERVICE, region, expires=expires)
    request = AWSRequest(method="GET", url=f"https://{host}/", params={"Action": ACTION})
    request.context["timestamp"] = amz_date
    auth._modify_request_before_signing(request)  # the query parameters the signer adds
    canonical = auth.canonical_request(request)
    return auth.signature(auth.string_to_sign(request, canonical), request)
