"""What the client commands of ``pylog`` share: the cluster they talk to (``--bootstrap-server``
or the local broker), their librdkafka settings (``--command-config``), the check that it answers,
admin futures, progress bars and the one-line error.
"""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from kafka_spark.client.librdkafka_log import routed
from kafka_spark.client.token_provider import TokenLoginError
from kafka_spark.errors import PylogError

log = logging.getLogger("kafka_spark")


class CliError(PylogError):
    """A user-facing failure: printed as one line, exit status 1."""


def bootstrap(args: argparse.Namespace) -> str:
    """``--bootstrap-server``, or the local broker's address when one runs."""
    if args.bootstrap_server:
        return args.bootstrap_server
    from kafka_spark.broker.discovery import find_running

    info = find_running()
    if info is None:
        raise CliError(
            "no --bootstrap-server given and no local broker running; "
            "start one with `pylog broker start` or pass --bootstrap-server HOST:PORT"
        )
    return info.bootstrap_servers


def client_config(args: argparse.Namespace, **settings: Any) -> dict[str, Any]:
    """librdkafka settings of a client command: the bootstrap servers, the ``--command-config``
    file (Kafka client properties, Java's SASL/TLS names translated), then ``settings``."""
    config: dict[str, Any] = {}
    path = getattr(args, "command_config", None)
    if path:
        from kafka_spark.broker.properties import read_properties
        from kafka_spark.common.jaas import JaasConfigError, librdkafka_config

        ignored: list[tuple[str, str]] = []
        try:
            config.update(librdkafka_config(read_properties(path), prefix="", ignored=ignored))
        except OSError as error:
            raise CliError(f"cannot read --command-config {path}: {error.strerror}") from None
        except JaasConfigError as error:
            raise CliError(f"--command-config {path}: {error}") from None
        for name, why in ignored:
            log.warning("--command-config %s: ignoring %s: %s", path, name, why)
    config["bootstrap.servers"] = bootstrap(args)  # --bootstrap-server wins over the file
    check_reachable(args, config["bootstrap.servers"])
    # What the tools print is what scripts read: librdkafka's informational lines (such as
    # "Purging N unserved events" when a client is destroyed) stay out of it; its warnings and
    # errors go through Python logging (rate-limited, to stderr), as Kafka's tools log WARN and up.
    config["log_level"] = 4
    config.update(settings)
    check_login(args, config)
    try:
        return routed(config)
    except TokenLoginError as error:
        raise CliError(str(error)) from None


_QUIET = logging.getLogger("kafka_spark.librdkafka.login_check")
_QUIET.propagate = False
_QUIET.addHandler(logging.NullHandler())


def check_login(args: argparse.Namespace, config: dict[str, Any]) -> None:
    """With a SASL login, fail at once, in one line naming the step (no token from the identity
    provider, the token or the password refused), where librdkafka would only time out: a
    metadata request on a client of its own, once per command."""
    if "sasl.mechanism" not in config or getattr(args, "logged_in", False):
        return
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    from kafka_spark.client.refusal import CredentialsRefused, RefusalWatch, list_topics_watching

    watch = RefusalWatch()
    try:
        probe_config: dict[str, Any] = routed({**config, "error_cb": watch})
        probe_config["logger"] = _QUIET  # its own log lines would repeat what the one-line error says
        probe = AdminClient(probe_config)
        list_topics_watching(probe, watch, config["bootstrap.servers"], REACH_TIMEOUT_S)
    except (CredentialsRefused, TokenLoginError) as error:
        raise CliError(str(error)) from None
    except KafkaException:
        return  # not a refusal: the command's own request reports it
    args.logged_in = True


#: How long a client command waits for a cluster that refuses connections (one starting up) or
#: does not answer a Kafka request.
REACH_TIMEOUT_S = 5.0


def check_reachable(args: argparse.Namespace, address: str) -> None:
    """Fail at once, in one line, when nothing listens at the cluster's address or what listens
    does not answer: librdkafka would wait out each request's timeout and then say only
    "transport failure" or "timed out"."""
    from kafka_spark.client.reachability import ClusterUnreachable, wait_reachable

    if getattr(args, "reached", None) == address:
        return
    try:
        wait_reachable(address, REACH_TIMEOUT_S, require_answer=True)
    except ClusterUnreachable as error:
        raise CliError(
            f"{error}; check that the broker runs (`pylog broker status` for the local one) "
            "and that --bootstrap-server names it"
        ) from None
    args.reached = address


def admin(args: argparse.Namespace) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(args))


def wait(futures: dict[Any, Any], what: str, tolerate: str | None = None) -> bool:
    """Wait for admin futures; a failure is a CliError, except the error named ``tolerate``
    (e.g. TOPIC_ALREADY_EXISTS for --if-not-exists): then False is returned."""
    from confluent_kafka import KafkaException

    for name, future in futures.items():
        try:
            future.result(timeout=30)
        except KafkaException as error:
            if tolerate is not None and error.args[0].name() == tolerate:
                return False
            raise CliError(f"{what} {name} failed: {error.args[0].str()}") from None
    return True


def progress(args: argparse.Namespace, what: str, **kwargs: Any) -> Any:
    """A progress bar with rates on stderr, shown when stderr is a terminal (or --progress)."""
    if not (getattr(args, "progress", False) or sys.stderr.isatty()):
        return NoProgress()  # and tqdm is not imported: a piped command starts faster
    from tqdm import tqdm

    return tqdm(desc=what, file=sys.stderr, mininterval=0.5, **kwargs)


class NoProgress:
    """The progress bar of a command whose progress is not shown."""

    def update(self, n: int = 1) -> None:
        pass

    def close(self) -> None:
        pass


def key_value(item: str, option: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise CliError(f"{option} takes NAME=VALUE, got {item!r}")
    return key, value
