"""SASL/OAUTHBEARER and Amazon MSK IAM logins: Kafka's Java settings in librdkafka's terms.

Spark jobs carry a managed Kafka's login as Java client settings: a SASL mechanism, a JAAS line
and the class names of Java callback handlers. librdkafka logs in with OAUTHBEARER in two ways of
its own, and pylog adds a third; :func:`token_login` picks one from the Java settings
(named here without their ``kafka.`` prefix):

- **OIDC client credentials**, librdkafka's ``sasl.oauthbearer.method=oidc``:
  ``sasl.mechanism=OAUTHBEARER`` with ``sasl.login.callback.handler.class`` =
  ``org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler`` (or its
  pre-4.0 ``...oauthbearer.secured.`` name; or none, with a token endpoint given),
  ``sasl.oauthbearer.token.endpoint.url`` and the JAAS line ``OAuthBearerLoginModule required
  clientId="..." clientSecret="..." scope="..." extension_x="...";``, whose options become
  ``sasl.oauthbearer.client.id`` / ``.client.secret`` / ``.scope`` / ``.extensions``;
- **Kafka's unsecured development login**, librdkafka's unsecured JWT
  (``enable.sasl.oauthbearer.unsecure.jwt``): ``OAuthBearerLoginModule required
  unsecuredLoginStringClaim_sub="alice";`` and no handler class;
- **a token callback**, pylog's: ``sasl.oauthbearer.token.provider=package.module:function``
  names a Python function that returns tokens. Amazon MSK's IAM login is one
  (:data:`MSK_PROVIDER`, signing with AWS's aws-msk-iam-sasl-signer-python):
  ``sasl.mechanism=AWS_MSK_IAM`` with ``software.amazon.msk.auth.iam.IAMLoginModule required
  [awsProfileName="..."] [awsRoleArn="..."];`` and ``sasl.client.callback.handler.class`` =
  ``software.amazon.msk.auth.iam.IAMClientCallbackHandler``, or ``OAUTHBEARER`` with MSK's
  ``IAMOAuthBearerLoginCallbackHandler``.

A callable is not a config string, and configs travel as strings (frozen into Spark's input
partitions, pickled to executors). So a callback login is written down as two strings, and the
callable is built where the client is (``kafka_spark.client.token_provider``):

- :data:`PROVIDER` (``sasl.oauthbearer.token.provider``) names the function, ``module:function``;
- librdkafka's ``sasl.oauthbearer.config`` carries the function's options, as a JSON object (the
  JAAS line's options and the pairs of a ``sasl.oauthbearer.config`` the user set). librdkafka
  counts that setting as sensitive: its debug output never prints it.

Nothing here imports the provider or any AWS library: this module runs wherever a query is
defined and planned. Errors name the setting and what to set, never a value (these settings
hold client secrets).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from kafka_spark.errors import PylogError

__all__ = [
    "MSK_EXTRA_MISSING",
    "MSK_PROVIDER",
    "PROVIDER",
    "TokenLoginConfigError",
    "load_provider",
    "provider_options",
    "split_provider",
    "token_login",
    "wants_token_login",
]

#: pylog's setting naming a token function, ``package.module:function`` (never given to librdkafka).
PROVIDER = "sasl.oauthbearer.token.provider"
#: The token function of AWS MSK IAM logins, and what it needs installed.
MSK_PROVIDER = "kafka_spark.client.aws_msk:msk_iam_token"
MSK_SIGNER = "aws_msk_iam_sasl_signer"
MSK_EXTRA_MISSING = (
    "AWS MSK IAM login (kafka.sasl.mechanism=AWS_MSK_IAM) signs with AWS's aws-msk-iam-sasl-signer-python, "
    "which is not installed: pip install 'pyspark-pylog[aws]' where Spark runs Python (driver and executors)"
)

OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
MSK_MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
_OIDC_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)
_MSK_CLIENT_HANDLER = "software.amazon.msk.auth.iam.IAMClientCallbackHandler"
_MSK_OAUTH_HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
_RETRIEVERS = "org.apache.kafka.common.security.oauthbearer."
#: IAMLoginModule's options (aws-msk-iam-auth) that the signer uses; the others are named in errors.
MSK_OPTIONS = ("awsProfileName", "awsRoleArn", "awsRoleSessionName", "awsStsRegion", "awsDebugCreds")
_MSK_IGNORED = {
    "awsMaxRetries": "the Java library's retries of credential loading; botocore's own retries apply",
    "awsMaxBackOffTimeMs": "the Java library's retries of credential loading; botocore's own retries apply",
}
_UNSECURED = "unsecuredLogin"
#: Settings that librdkafka reads when it logs in with OAUTHBEARER itself.
_LIBRDKAFKA_OAUTH = ("sasl.oauthbearer.method", "enable.sasl.oauthbearer.unsecure.jwt")


class TokenLoginConfigError(PylogError, ValueError):
    """OAUTHBEARER or MSK IAM settings that pylog cannot turn into a librdkafka login; the message
    names the setting and what to set instead, never a value."""


def _short(name: str) -> str:
    """A Java class setting's class name: Databricks' shaded names read as the plain ones, and
    Java's rendering of a class default (``class org.apache...``) as the name."""
    return name.strip().removeprefix("class ").strip().removeprefix("kafkashaded.")


def wants_token_login(config: Mapping[str, str], module: str | None, handlers: Mapping[str, str]) -> bool:
    """Whether these settings ask for an OAUTHBEARER or MSK IAM login (``module``: the JAAS line's
    login module, ``handlers``: the Java handler and retriever class settings given)."""
    mechanism = (config.get("sasl.mechanism") or config.get("sasl.mechanisms") or "").strip().upper()
    return (
        mechanism in ("OAUTHBEARER", "AWS_MSK_IAM")
        or module in (OAUTH_MODULE, MSK_MODULE)
        or PROVIDER in config
        or any(_short(cls) in (*_OIDC_HANDLERS, _MSK_CLIENT_HANDLER, _MSK_OAUTH_HANDLER) for cls in handlers.values())
    )


def token_login(
    config: Mapping[str, str],
    jaas: tuple[str, dict[str, str]] | None,
    handlers: Mapping[str, str],
    prefix: str = "kafka.",
    ignored: list[tuple[str, str]] | None = None,
) -> dict[str, str]:
    """``config`` (client settings without the JAAS line and the Java class settings) with the
    login they ask for in librdkafka's terms.

    ``jaas``: the parsed ``sasl.jaas.config`` (module, options), if given; ``handlers``: the given
    ``sasl.login.callback.handler.class``, ``sasl.client.callback.handler.class`` and
    ``sasl.oauthbearer.jwt.retriever.class``. Settings given but not used are appended to
    ``ignored`` as (name, why). Raises :class:`TokenLoginConfigError`.
    """
    out = dict(config)
    ignored = ignored if ignored is not None else []
    module, options = jaas if jaas is not None else (None, {})
    mechanism = (out.pop("sasl.mechanism", None) or out.pop("sasl.mechanisms", None) or "").strip().upper()
    login = _short(handlers.get("sasl.login.callback.handler.class", ""))
    client = _short(handlers.get("sasl.client.callback.handler.class", ""))
    retriever = _short(handlers.get("sasl.oauthbearer.jwt.retriever.class", ""))
    jaas_setting = f"{prefix}sasl.jaas.config"

    if mechanism == "AWS_MSK_IAM" or module == MSK_MODULE or _MSK_OAUTH_HANDLER in (login, client):
        if module not in (None, MSK_MODULE, OAUTH_MODULE) or (module == OAUTH_MODULE and mechanism == "AWS_MSK_IAM"):
            raise TokenLoginConfigError(
                f"{prefix}sasl.mechanism=AWS_MSK_IAM logs in with {MSK_MODULE}: set {jaas_setting} to "
                f"'{MSK_MODULE} required;'"
            )
        if mechanism not in ("", "AWS_MSK_IAM", "OAUTHBEARER"):
            raise TokenLoginConfigError(
                f"{jaas_setting} uses {MSK_MODULE}: set {prefix}sasl.mechanism to AWS_MSK_IAM (or OAUTHBEARER)"
            )
        for name, cls in (("sasl.client.callback.handler.class", client), ("sasl.login.callback.handler.class", login)):
            if cls and cls not in (_MSK_CLIENT_HANDLER, _MSK_OAUTH_HANDLER):
                raise TokenLoginConfigError(
                    f"{prefix}{name} names {cls}, which does not belong to an AWS MSK IAM login: set "
                    f"{_MSK_CLIENT_HANDLER} (AWS_MSK_IAM) or {_MSK_OAUTH_HANDLER} (OAUTHBEARER), or leave it out"
                )
        # a token function the user names replaces the signer (other credentials, a proxy)
        return _callback(out, out.pop(PROVIDER, MSK_PROVIDER), _msk_options(options, jaas_setting, ignored), prefix)

    if mechanism not in ("", "OAUTHBEARER"):
        raise TokenLoginConfigError(
            f"{prefix}sasl.mechanism={mechanism} does not log in with OAUTHBEARER settings: set it to OAUTHBEARER"
        )
    if module not in (None, OAUTH_MODULE):
        raise TokenLoginConfigError(
            f"{prefix}sasl.mechanism=OAUTHBEARER logs in with {OAUTH_MODULE}: set {jaas_setting} to "
            f"'{OAUTH_MODULE} required ...;'"
        )
    if PROVIDER in out:
        for name in handlers:
            ignored.append((name, f"{prefix}{PROVIDER} gets the tokens instead"))
        return _callback(out, out.pop(PROVIDER), options, prefix)
    if jaas is None and not login and not retriever and "sasl.oauthbearer.method" in out:
        out["sasl.mechanism"] = "OAUTHBEARER"  # librdkafka's own OAUTHBEARER settings, passed as they are
        return out
    if client:
        ignored.append(("sasl.client.callback.handler.class", "OAUTHBEARER clients use no client callback handler"))
    if login and login not in _OIDC_HANDLERS:
        raise TokenLoginConfigError(
            f"{prefix}sasl.login.callback.handler.class names {login}, a Java class, which cannot run in "
            f"librdkafka: write the token's source as a Python function and name it with "
            f"{prefix}{PROVIDER}=package.module:function (see docs/managed-kafka.md)"
        )
    if login or "sasl.oauthbearer.token.endpoint.url" in out or retriever or "clientId" in options:
        return _oidc(out, options, retriever, prefix, ignored)
    if any(name.startswith(_UNSECURED) for name in options):
        return _unsecured(out, options, prefix)
    if jaas is not None or not any(name in out for name in _LIBRDKAFKA_OAUTH):
        raise TokenLoginConfigError(
            f"{prefix}sasl.mechanism=OAUTHBEARER needs a way to get tokens: an OIDC token endpoint "
            f"({prefix}sasl.login.callback.handler.class=org.apache.kafka.common.security.oauthbearer."
            f'OAuthBearerLoginCallbackHandler, {prefix}sasl.oauthbearer.token.endpoint.url and clientId="..." '
            f'clientSecret="..." in {jaas_setting}), Kafka\'s unsecured development login '
            f'(unsecuredLoginStringClaim_sub="..." in {jaas_setting}), or a token function '
            f"({prefix}{PROVIDER}=package.module:function)"
        )
    out["sasl.mechanism"] = "OAUTHBEARER"  # librdkafka's own OAUTHBEARER settings, passed as they are
    return out


def _callback(out: dict[str, str], reference: str, options: Mapping[str, str], prefix: str) -> dict[str, str]:
    split_provider(reference, f"{prefix}{PROVIDER}")
    merged = {**provider_options(out.pop("sasl.oauthbearer.config", "")), **options}
    out["sasl.mechanism"] = "OAUTHBEARER"
    out[PROVIDER] = reference.strip()
    out["sasl.oauthbearer.config"] = json.dumps(merged, sort_keys=True)
    for name in _LIBRDKAFKA_OAUTH:
        if name in out:
            raise TokenLoginConfigError(f"set {prefix}{name} or {prefix}{PROVIDER}, not both")
    return out


def _msk_options(options: Mapping[str, str], jaas_setting: str, ignored: list[tuple[str, str]]) -> dict[str, str]:
    kept = {}
    for name, value in options.items():
        if name in MSK_OPTIONS:
            kept[name] = value
        elif name in _MSK_IGNORED:
            ignored.append((f"sasl.jaas.config option {name}", _MSK_IGNORED[name]))
        elif name == "awsMskRegionProvider":
            raise TokenLoginConfigError(
                f"{jaas_setting}: awsMskRegionProvider names a Java class, which cannot run here: pylog takes the "
                "region from the bootstrap servers' host names (b-1.x.kafka.<region>.amazonaws.com), else from "
                "kafka.sasl.oauthbearer.config=region=<region>, else from AWS_REGION / AWS_DEFAULT_REGION"
            )
        else:
            raise TokenLoginConfigError(
                f"{jaas_setting}: IAMLoginModule has no option {name!r} pylog knows; it takes " + ", ".join(MSK_OPTIONS)
            )
    return kept


def _oidc(
    out: dict[str, str], options: Mapping[str, str], retriever: str, prefix: str, ignored: list[tuple[str, str]]
) -> dict[str, str]:
    """librdkafka's OIDC login. As Kafka's ``ConfigOrJaas``, a client setting wins over the JAAS
    option of the same meaning."""
    jaas_setting = f"{prefix}sasl.jaas.config"
    kind = retriever.removeprefix(_RETRIEVERS)
    if kind == "JwtBearerJwtRetriever":
        out["sasl.oauthbearer.grant.type"] = "urn:ietf:params:oauth:grant-type:jwt-bearer"
    elif kind == "FileJwtRetriever" or out.get("sasl.oauthbearer.token.endpoint.url", "").startswith("file:"):
        raise TokenLoginConfigError(
            f"{prefix}sasl.oauthbearer.token.endpoint.url names a token file (Java's FileJwtRetriever), which "
            f"librdkafka cannot read: give the OIDC token endpoint's https URL, or name a function that reads the "
            f"file with {prefix}{PROVIDER}=package.module:function"
        )
    elif retriever and kind not in ("ClientCredentialsJwtRetriever", "DefaultJwtRetriever"):
        raise TokenLoginConfigError(
            f"{prefix}sasl.oauthbearer.jwt.retriever.class names {retriever}, a Java class, which cannot run in "
            f"librdkafka: name a Python function with {prefix}{PROVIDER}=package.module:function"
        )
    if "sasl.oauthbearer.token.endpoint.url" not in out:
        raise TokenLoginConfigError(
            f"an OIDC login (OAuthBearerLoginCallbackHandler) needs the identity provider's token endpoint: set "
            f"{prefix}sasl.oauthbearer.token.endpoint.url"
        )
    for java, librdkafka, jaas_name in (
        ("sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.id", "clientId"),
        ("sasl.oauthbearer.client.credentials.client.secret", "sasl.oauthbearer.client.secret", "clientSecret"),
        ("sasl.oauthbearer.scope", "sasl.oauthbearer.scope", "scope"),
    ):
        value = out.pop(java, None) or out.pop(librdkafka, None) or options.get(jaas_name)
        if value:
            out[librdkafka] = value
    grant = out.get("sasl.oauthbearer.grant.type", "client_credentials")
    if grant == "client_credentials":
        for needed, jaas_name in (
            ("sasl.oauthbearer.client.id", "clientId"),
            ("sasl.oauthbearer.client.secret", "clientSecret"),
        ):
            if needed not in out:
                raise TokenLoginConfigError(
                    f'an OIDC login needs the client\'s credentials: give {jaas_name}="..." in {jaas_setting} '
                    f"(or set {prefix}{needed})"
                )
    extensions = {name[len("extension_") :]: value for name, value in options.items() if name.startswith("extension_")}
    if extensions:
        if any(re.search(r"[,=]", key + value) for key, value in extensions.items()):
            raise TokenLoginConfigError(
                f"{jaas_setting}: a SASL extension's name or value holds ',' or '=', which librdkafka's "
                "sasl.oauthbearer.extensions cannot carry"
            )
        given = out.get("sasl.oauthbearer.extensions")
        out["sasl.oauthbearer.extensions"] = ",".join(
            ([given] if given else []) + [f"{key}={value}" for key, value in extensions.items()]
        )
    truststore = options.get("ssl.truststore.location")
    if truststore is not None:  # the JAAS line's TLS settings are those of the token endpoint's HTTPS
        pem = options.get("ssl.truststore.type", "").upper() == "PEM"
        if not pem and not truststore.lower().endswith((".pem", ".crt")):
            raise TokenLoginConfigError(
                f"{jaas_setting}: ssl.truststore.location names a Java trust store, which librdkafka cannot read: "
                f"export its CA certificates to a PEM file and set {prefix}https.ca.location to it"
            )
        out["https.ca.location"] = truststore
    used = {"clientId", "clientSecret", "scope", "ssl.truststore.location", "ssl.truststore.type"}
    for name in options:
        if name not in used and not name.startswith("extension_"):
            ignored.append((f"sasl.jaas.config option {name}", "not used by an OIDC login in librdkafka"))
    out["sasl.mechanism"] = "OAUTHBEARER"
    out["sasl.oauthbearer.method"] = "oidc"
    return out


def _unsecured(out: dict[str, str], options: Mapping[str, str], prefix: str) -> dict[str, str]:
    """Kafka's ``OAuthBearerUnsecuredLoginCallbackHandler`` options as librdkafka's unsecured JWT
    (``sasl.oauthbearer.config``: space-separated ``name=value`` pairs)."""
    jaas_setting = f"{prefix}sasl.jaas.config"
    principal_claim = options.get("unsecuredLoginPrincipalClaimName", "sub")
    scope_claim = options.get("unsecuredLoginScopeClaimName", "scope")
    pairs = {"principalClaimName": principal_claim}
    principal = options.get(f"unsecuredLoginStringClaim_{principal_claim}")
    if not principal:
        raise TokenLoginConfigError(
            f"{jaas_setting}: Kafka's unsecured login needs the principal: add "
            f'unsecuredLoginStringClaim_{principal_claim}="..."'
        )
    pairs["principal"] = principal
    if scope_claim != "scope":
        pairs["scopeClaimName"] = scope_claim
    scope = options.get(f"unsecuredLoginListClaim_{scope_claim}")
    if scope:  # Java's list claim: the first character separates the items
        pairs["scope"] = ",".join(item for item in scope[1:].split(scope[0]) if item)
    elif options.get(f"unsecuredLoginStringClaim_{scope_claim}"):
        pairs["scope"] = options[f"unsecuredLoginStringClaim_{scope_claim}"]
    if "unsecuredLoginLifetimeSeconds" in options:
        pairs["lifeSeconds"] = options["unsecuredLoginLifetimeSeconds"]
    for name, value in options.items():
        if name.startswith("unsecuredLoginExtension_"):
            pairs[f"extension_{name[len('unsecuredLoginExtension_') :]}"] = value
    known = {
        "unsecuredLoginPrincipalClaimName",
        "unsecuredLoginScopeClaimName",
        "unsecuredLoginLifetimeSeconds",
        f"unsecuredLoginStringClaim_{principal_claim}",
        f"unsecuredLoginStringClaim_{scope_claim}",
        f"unsecuredLoginListClaim_{scope_claim}",
    }
    extra = [name for name in options if name not in known and not name.startswith("unsecuredLoginExtension_")]
    if extra:
        raise TokenLoginConfigError(
            f"{jaas_setting}: librdkafka's unsecured token carries the principal, the scope and SASL extensions "
            f"only, not {', '.join(sorted(extra))}: leave them out"
        )
    if any(re.search(r"\s", value) for value in pairs.values()):
        raise TokenLoginConfigError(f"{jaas_setting}: librdkafka's unsecured token takes no spaces in its claims")
    if "sasl.oauthbearer.config" in out:
        raise TokenLoginConfigError(
            f"set Kafka's unsecured login in {jaas_setting} or librdkafka's in {prefix}sasl.oauthbearer.config, "
            "not both"
        )
    out["sasl.mechanism"] = "OAUTHBEARER"
    out["enable.sasl.oauthbearer.unsecure.jwt"] = "true"
    out["sasl.oauthbearer.config"] = " ".join(f"{name}={value}" for name, value in pairs.items())
    return out


_REFERENCE = re.compile(r"^\s*([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\s*:\s*([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)\s*$")


def split_provider(reference: str, setting: str = f"kafka.{PROVIDER}") -> tuple[str, str]:
    """``(module, attribute path)`` of a ``package.module:function`` reference."""
    match = _REFERENCE.match(reference or "")
    if match is None:
        raise TokenLoginConfigError(
            f"{setting}={reference!r} is not a function reference: write it as package.module:function "
            "(a module the driver and the executors can import, and a function in it)"
        )
    return match.group(1), match.group(2)


_PAIR_START = re.compile(r"[\s,]+(?=[A-Za-z_][\w.\-]*=)")


def provider_options(text: str) -> dict[str, str]:
    """The options a token function gets from ``sasl.oauthbearer.config``: a JSON object (as
    :func:`token_login` writes it), or librdkafka's ``name=value`` pairs separated by spaces or
    commas (``region=eu-west-1``; a comma inside a value, as in ``scope=a,b``, stays)."""
    text = (text or "").strip()
    if not text:
        return {}
    if text.startswith("{"):
        try:
            loaded = json.loads(text)
        except ValueError:
            loaded = None
        if not isinstance(loaded, dict):
            raise TokenLoginConfigError("sasl.oauthbearer.config is not a JSON object (its value is not shown)")
        return {str(key): str(value) for key, value in loaded.items()}
    options = {}
    for pair in _PAIR_START.split(text):
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise TokenLoginConfigError(
                "sasl.oauthbearer.config: write the token function's options as name=value pairs "
                "(region=eu-west-1 audience=kafka); the value is not shown"
            )
        options[name] = value
    return options


def load_provider(reference: str, setting: str = f"kafka.{PROVIDER}") -> object:
    """The function a ``package.module:function`` reference names, imported in this process.
    Raises :class:`TokenLoginConfigError` naming what is missing; an error the module raises on
    import that is pylog's own (the AWS extra missing) passes as it is."""
    import importlib.util

    module_name, path = split_provider(reference, setting)
    if reference.strip() == MSK_PROVIDER and importlib.util.find_spec(MSK_SIGNER) is None:
        raise TokenLoginConfigError(MSK_EXTRA_MISSING)
    try:
        target: object = importlib.import_module(module_name)
    except PylogError:
        raise
    except ModuleNotFoundError as error:
        raise TokenLoginConfigError(
            f"{setting}: cannot import {module_name} ({error}): install it where Spark runs Python, on the driver "
            "and on the executors (a pip package, or --py-files / spark.submit.pyFiles)"
        ) from None
    except Exception as error:  # noqa: BLE001 - the user's module failed on import: named, one line
        raise TokenLoginConfigError(
            f"{setting}: importing {module_name} failed: {type(error).__name__}: {error}"
        ) from None
    for part in path.split("."):
        if not hasattr(target, part):
            raise TokenLoginConfigError(f"{setting}: {module_name} has no {path}")
        target = getattr(target, part)
    if not callable(target):
        raise TokenLoginConfigError(f"{setting}: {module_name}:{path} is not a function")
    return target
