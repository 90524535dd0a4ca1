"""The reference tables of the documentation, rendered from the code when the site is built.

Each table comes from the table the code itself works from, so the pages cannot drift from it:

* the source's and sinks' options: ``SOURCE_OPTIONS`` (kafka_spark/options.py), ``AVRO_OPTION_DOCS``
  (kafka_spark/avro/codec.py), ``TOPIC_SINK_OPTIONS`` (kafka_spark/topics/options.py) and
  ``FILE_SINK_OPTIONS`` (kafka_spark/files/options.py): the same tuples the option parsers take
  their known names from;
* the ``kafka.*`` settings: ``PROPERTIES`` of kafka_spark/java_properties.py, the rules that
  translate every Java client property;
* the ``pylog`` command line: the argparse parsers of kafka_spark/cli/main.py, each command's
  ``--help`` as the command prints it;
* the broker's ``server.properties`` keys: kafka_spark/broker/properties.py (the keys it applies,
  with their defaults from ``BrokerConfig`` and ``LogConfig``, and the keys it ignores).

As a Sphinx extension (docs/conf.py) it writes them into docs/_generated/ before Sphinx reads the
pages, which include them. ``python docs/_ext/pylog_reference.py DIR`` writes them into DIR.
"""

from __future__ import annotations

import argparse
import dataclasses
import inspect
import os
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

GENERATED = Path(__file__).resolve().parents[1] / "_generated"


def _cell(text: str) -> str:
    """Markdown table cell text: pipes escaped, one line."""
    return " ".join(text.replace("|", "\\|").split())


def option_table(options: Iterable[Any], against: str) -> str:
    """A table of ``OptionDoc`` rows: option, how it compares with Spark's, default, what it does."""
    lines = [f"| option | against {against} | default | what it does |", "|---|---|---|---|"]
    for option in options:
        spark = f"**{option.spark}**" if option.spark != "same" else option.spark
        lines.append(f"| `{option.name}` | {spark} | {_cell(option.default) or '—'} | {_cell(option.note)} |")
    return "\n".join(lines) + "\n"


def java_properties_table() -> str:
    """Every Java consumer and producer property and what pylog does with it, per client."""
    from kafka_spark.java_properties import PROPERTIES

    def cell(rule: Any) -> str:
        if rule is None:
            return "—"
        what = {
            "same": "same",
            "renamed": "translated",
            "pylog": "**pylog**",
            "ignored": "ignored (warning)",
            "rejected": "refused",
        }[rule.action]
        if rule.action == "rejected":
            return what
        return f"{what}: {_cell(rule.note)}" if rule.note else what

    lines = ["| property | source (consumer) | topic sink (producer) |", "|---|---|---|"]
    for name, prop in PROPERTIES.items():
        lines.append(f"| `{name}` | {cell(prop.consumer)} | {cell(prop.producer)} |")
    return "\n".join(lines) + "\n"


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterable[tuple[tuple[str, ...], Any]]:
    """Every parser under ``parser`` with its command words, depth first, in definition order."""
    yield path, parser
    for action in parser._actions:  # argparse keeps subcommands only here
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if sub.prog.split()[-1] == name:  # skip aliases
                    yield from _commands(sub, (*path, name))


def cli_reference() -> str:
    """Each ``pylog`` command's ``--help``, as the command prints it at 100 columns."""
    from kafka_spark.cli.main import build_parser

    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"
    try:
        parts = []
        for path, parser in _commands(build_parser()):
            if not path:
                parts.append(f"## `pylog`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
                continue
            heading = "#" * min(len(path) + 2, 4)
            parts.append(f"{heading} `pylog {' '.join(path)}`\n\n```text\n{parser.format_help().rstrip()}\n```\n")
        return "\n".join(parts)
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


# What the keys that broker_options() handles itself set (the other applied keys map to a
# BrokerConfig field or a topic default, and are described from that).
_HANDLED = {
    "listeners": "Where the broker listens: `PLAINTEXT://host:port` (port 0: any free port), `SASL_PLAINTEXT://`, "
    "`SSL://` or `SASL_SSL://`; one listener.",
    "advertised.listeners": "The address Metadata gives clients, when it is not the listener's.",
    "log.dirs": "The data directory (one).",
    "log.dir": "The data directory, when `log.dirs` is not set.",
    "log.retention.ms": "The default `retention.ms` of topics; wins over the minutes and hours forms.",
    "log.retention.minutes": "`log.retention.ms` in minutes.",
    "log.retention.hours": "`log.retention.ms` in hours.",
    "log.roll.ms": "The default `segment.ms` of topics; wins over `log.roll.hours`.",
    "log.roll.hours": "`log.roll.ms` in hours.",
    "sasl.enabled.mechanisms": "Of PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, on a SASL listener.",
    "ssl.keystore.type": "`PEM`: the broker's key and certificate chain are one PEM file.",
    "ssl.keystore.location": "That PEM file.",
    "ssl.keystore.password": "Accepted; a PEM key's password is `ssl.key.password`.",
    "ssl.key.password": "The password of the key in the PEM file.",
    "ssl.truststore.type": "`PEM`.",
    "ssl.truststore.location": "The CAs client certificates must chain to (PEM).",
    "ssl.truststore.password": "Accepted (a PEM trust store has none).",
    "ssl.client.auth": "`none`, `requested` or `required`: client certificates.",
    "log.flush.on.ack.all": "**pylog**: fsync a partition before answering an acks=all produce (a single node has "
    "no replica to rely on); `false` leaves flushing to the operating system, as Kafka does.",
}


def _field_defaults() -> dict[str, Any]:
    """The defaults of EmbeddedBroker's keywords and of BrokerConfig's fields, by name."""
    from kafka_spark.broker.config import BrokerConfig
    from kafka_spark.broker.embedded import EmbeddedBroker

    defaults: dict[str, Any] = {}
    for field in dataclasses.fields(BrokerConfig):
        if field.default is not dataclasses.MISSING:
            defaults[field.name] = field.default
        elif field.default_factory is not dataclasses.MISSING:
            defaults[field.name] = field.default_factory()
    for name, parameter in inspect.signature(EmbeddedBroker.__init__).parameters.items():
        if parameter.default is not inspect.Parameter.empty:
            defaults[name] = parameter.default
    return defaults


def _shown(value: Any) -> str:
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if value in ((), None):
        return "—"
    if isinstance(value, tuple):
        return f"`{','.join(map(str, value))}`"
    return f"`{value}`"


def server_properties_table() -> str:
    """Every server.properties key the broker applies, and the ones it accepts and ignores."""
    from kafka_spark.broker import properties
    from kafka_spark.broker.storage.config import LogConfig

    defaults = _field_defaults()
    topic_defaults = LogConfig().to_topic_configs()
    rows = []
    for key in sorted(properties.known_keys()):
        if key in properties._BROKER_KEYS:
            keyword, _ = properties._BROKER_KEYS[key]
            applied = f"`EmbeddedBroker({keyword}=...)`"
            default = _shown(defaults.get(keyword))
            bound = properties._BOUNDS.get(key)
            note = bound[2].capitalize() + "." if bound else ""
        elif key in properties._LOG_DEFAULTS:
            topic_key = properties._LOG_DEFAULTS[key]
            applied = f"topic default `{topic_key}`"
            default = _shown(topic_defaults.get(topic_key, ""))
            note = ""
        elif key in _HANDLED:
            applied, default, note = "", "—", _HANDLED[key]
            if key == "log.flush.on.ack.all":
                default = _shown(LogConfig().flush_on_ack_all)
        else:
            raise KeyError(f"server.properties key {key!r} has no description: add it to _HANDLED in {__file__}")
        if key in ("log.retention.ms", "log.roll.ms"):
            topic_key = "retention.ms" if key == "log.retention.ms" else "segment.ms"
            applied, default = f"topic default `{topic_key}`", _shown(topic_defaults[topic_key])
        rows.append(f"| `{key}` | {applied or '—'} | {default} | {_cell(note) or '—'} |")
    lines = ["| key | sets | default | notes |", "|---|---|---|---|", *rows]
    ignored = ", ".join(f"`{key}`" for key in sorted(properties.IGNORED))
    return (
        "\n".join(lines)
        + "\n\nAccepted and reported as ignored (replication, KRaft and threads a one-node broker does not "
        + f"have): {ignored}.\n"
    )


def tables() -> dict[str, Callable[[], str]]:
    from kafka_spark.avro.codec import AVRO_OPTION_DOCS
    from kafka_spark.files.options import FILE_SINK_OPTIONS
    from kafka_spark.options import SOURCE_OPTIONS
    from kafka_spark.topics.options import TOPIC_SINK_OPTIONS

    return {
        "source-options.md": lambda: option_table(SOURCE_OPTIONS, "Spark's Kafka source"),
        "avro-options.md": lambda: option_table(AVRO_OPTION_DOCS, "Spark"),
        "topic-sink-options.md": lambda: option_table(TOPIC_SINK_OPTIONS, "Spark's Kafka sink"),
        "file-sink-options.md": lambda: option_table(FILE_SINK_OPTIONS, "Spark's file sink"),
        "kafka-settings.md": java_properties_table,
        "cli.md": cli_reference,
        "server-properties.md": server_properties_table,
    }


def write(directory: Path = GENERATED) -> list[Path]:
    """Write every table into ``directory``; a file whose text is unchanged is left alone, so
    Sphinx does not rebuild the pages that include it."""
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, render in tables().items():
        path = directory / name
        text = "<!-- generated by docs/_ext/pylog_reference.py; do not edit -->\n\n" + render()
        if not path.exists() or path.read_text() != text:
            path.write_text(text)
        written.append(path)
    return written


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", lambda app: write())
    return {"parallel_read_safe": True, "parallel_write_safe": True}


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else GENERATED):
        print(path)
