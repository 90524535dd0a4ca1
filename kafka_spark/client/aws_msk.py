"""Amazon MSK IAM logins: OAUTHBEARER tokens signed by AWS's own signer library.

MSK's IAM login, in Java ``sasl.mechanism=AWS_MSK_IAM`` with ``IAMLoginModule`` (or OAUTHBEARER
with ``IAMOAuthBearerLoginCallbackHandler``), is for librdkafka an OAUTHBEARER login whose token is
a SigV4-presigned ``kafka-cluster:Connect`` URL. :func:`msk_iam_token` is that login's token
function (kafka_spark.common.token_login maps the Java settings to it); it signs with
``aws-msk-iam-sasl-signer-python``, pylog's ``aws`` extra (``pip install 'pyspark-pylog[aws]'``).

- **Region**, as the Java library finds it: the ``region`` option
  (``kafka.sasl.oauthbearer.config=region=eu-west-1``), else the bootstrap servers' host names
  (``b-1.c.x.c2.kafka.<region>.amazonaws.com``, ``boot-x.c1.kafka-serverless.<region>.amazonaws.com``),
  else ``AWS_REGION``, ``AWS_DEFAULT_REGION`` or the AWS profile's region (botocore's).
- **Credentials**, from the IAMLoginModule options: ``awsRoleArn`` (with ``awsRoleSessionName``
  and ``awsStsRegion``) assumes that role with AWS STS, using the profile ``awsProfileName`` if
  given, else the default credential chain; ``awsProfileName`` alone uses that profile; nothing
  uses botocore's default chain (environment, shared files, container and instance roles).
  ``awsDebugCreds=true`` logs, at debug level, which identity signs (one STS call), as the Java
  library does.

Signed tokens last 15 minutes (the signer's fixed lifetime); librdkafka asks for a new one after
12. Nothing here logs or raises a key, a secret or a token.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from typing import Any

from kafka_spark.common.token_login import MSK_EXTRA_MISSING
from kafka_spark.errors import PylogError

__all__ = ["MskLoginError", "msk_iam_token", "msk_region"]

log = logging.getLogger("kafka_spark")

_HOST_REGION = re.compile(r"\.kafka(?:-serverless)?\.([a-z]{2}(?:-[a-z]+)+-\d+)\.amazonaws\.com(?:\.cn)?$")
_DEFAULT_SESSION = "MSKSASLDefaultSession"


class _NoSignatures(logging.Filter):
    """botocore's signer logs, at debug level, the canonical request (with any session token),
    the string to sign and the signature: enough to rebuild a presigned token, which is a
    credential for 15 minutes. Those records are dropped; botocore's other debug lines stay."""

    _SECRET_LINES = ("CanonicalRequest:", "StringToSign:", "Signature:")

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(self._SECRET_LINES)


logging.getLogger("botocore.auth").addFilter(_NoSignatures())


class MskLoginError(PylogError, ConnectionError):
    """No MSK IAM token could be signed: the message says which step (the extra, the region, the
    credentials)."""


def _signer() -> Any:
    try:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
    except ImportError:
        raise MskLoginError(MSK_EXTRA_MISSING) from None
    return MSKAuthTokenProvider


def msk_region(options: Mapping[str, str]) -> str:
    """The AWS region of the cluster (see the module docstring for the order)."""
    if options.get("region", "").strip():
        return options["region"].strip()
    for server in options.get("bootstrap.servers", "").split(","):
        host = server.strip().rsplit(":", 1)[0].lower()
        match = _HOST_REGION.search(host)
        if match:
            return match.group(1)
    import botocore.session

    region = os.environ.get("AWS_REGION") or botocore.session.Session(
        profile=options.get("awsProfileName") or None
    ).get_config_variable("region")
    if not region:
        raise MskLoginError(
            f"cannot tell the AWS region of {options.get('bootstrap.servers') or 'the cluster'} from its host "
            "names: set kafka.sasl.oauthbearer.config=region=<region> (or AWS_REGION where Spark runs Python)"
        )
    return str(region)


def msk_iam_token(options: Mapping[str, str]) -> tuple[str, float]:
    """A signed MSK IAM token and its expiry (seconds since the epoch), for librdkafka."""
    signer = _signer()
    region = msk_region(options)
    role, profile = options.get("awsRoleArn"), options.get("awsProfileName")
    try:
        if role and not profile and not options.get("awsStsRegion"):
            token, expiry_ms = signer.generate_auth_token_from_role_arn(
                region, role, options.get("awsRoleSessionName") or _DEFAULT_SESSION
            )
        elif role:
            token, expiry_ms = signer.generate_auth_token_from_credentials_provider(region, _assumed_role(options))
        elif profile:
            token, expiry_ms = signer.generate_auth_token_from_profile(region, profile)
        else:
            token, expiry_ms = signer.generate_auth_token(region, aws_debug_creds=_debug(options))
    except PylogError:
        raise
    except Exception as error:  # noqa: BLE001 - botocore's errors, named in one line
        raise MskLoginError(_credentials_failure(error, options)) from None
    return token, expiry_ms / 1000.0


def _debug(options: Mapping[str, str]) -> bool:
    return options.get("awsDebugCreds", "").strip().lower() == "true"


def _credentials_failure(error: Exception, options: Mapping[str, str]) -> str:
    source = (
        f"assuming role {options['awsRoleArn']}"
        if options.get("awsRoleArn")
        else f"profile {options['awsProfileName']}"
        if options.get("awsProfileName")
        else "the default credential chain (environment, shared files, container or instance role)"
    )
    if isinstance(error, AttributeError) and "access_key" in str(error):  # botocore found none: None
        return f"no AWS credentials in {source}"
    return f"AWS credentials from {source}: {type(error).__name__}: {error}"


def _assumed_role(options: Mapping[str, str]) -> Any:
    """A botocore credential provider assuming ``awsRoleArn`` with the profile's credentials or
    through the regional STS endpoint of ``awsStsRegion`` (the signer's own role path uses the
    default credentials and the global endpoint). botocore comes with the extra: imported here."""
    import botocore.session
    from botocore.credentials import CredentialProvider, Credentials

    class AssumedRole(CredentialProvider):
        METHOD = "assume-role"

        def load(self) -> Any:
            session = botocore.session.Session(profile=options.get("awsProfileName") or None)
            sts = session.create_client("sts", region_name=options.get("awsStsRegion") or None)
            answer = sts.assume_role(
                RoleArn=options["awsRoleArn"],
                RoleSessionName=options.get("awsRoleSessionName") or _DEFAULT_SESSION,
            )["Credentials"]
            return Credentials(answer["AccessKeyId"], answer["SecretAccessKey"], answer["SessionToken"])

    return AssumedRole()
