"""Option names and values as a Spark user types them: the checks shared by the three formats.

Spark's options are case-insensitive, and its Kafka source and sink ignore options they do not
know. That silence hides typos (``startingOffset`` reads from the default position, quietly), so
pylog tells them apart:

* an unknown name **close to a known one** (an edit or two away, any case) is a probable typo and
  fails the query where it is defined: ``unknown option 'startingOffset' for the pylog source;
  did you mean startingOffsets?``;
* any other unknown name is ignored, as Spark does, with one warning naming it;
* an invalid value lists the valid ones (and the closest, when one is close).

:func:`close_match` is the one notion of "close" for all of them.
"""

from __future__ import annotations

import difflib
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "DIFFERS",
    "PYLOG_ONLY",
    "SAME",
    "OptionDoc",
    "close_match",
    "did_you_mean",
    "known_names",
    "one_of",
    "unknown_options",
    "warn_once",
]

log = logging.getLogger("kafka_spark")

#: difflib's similarity ratio from which a name counts as a probable typo of another:
#: ``startingoffset``/``startingoffsets`` 0.97, ``topci``/``topic`` 0.8, ``earlist``/``earliest``
#: 0.93, while unrelated short names (``path``/``topic`` 0.22) stay far below.
CUTOFF = 0.8
#: For values, where the suggestion is only a hint in an error that is raised anyway.
VALUE_CUTOFF = 0.6


_warned: set[str] = set()

#: How an option compares with Spark's own Kafka source or sink (the documentation's third column).
SAME = "same"
DIFFERS = "differs"
PYLOG_ONLY = "pylog only"


@dataclass(frozen=True)
class OptionDoc:
    """One option as the documentation lists it: the option tables of the source and the sinks
    (``SOURCE_OPTIONS``, ``TOPIC_SINK_OPTIONS``, ``FILE_SINK_OPTIONS``, ``AVRO_OPTION_DOCS``) are
    tuples of these, the known names that typos are compared against are derived from them, and
    the reference pages of the documentation are rendered from them (docs/_ext/pylog_reference.py).

    ``spark`` says how the option compares with Spark's Kafka source or sink, or for the file sink
    Spark's file sink: :data:`SAME`, :data:`DIFFERS` (the note says how) or :data:`PYLOG_ONLY`.
    ``default`` is what applies without the option, in words; ``note`` what it does, in Markdown.
    """

    name: str
    spark: str
    default: str
    note: str

    def __post_init__(self) -> None:
        if self.spark not in (SAME, DIFFERS, PYLOG_ONLY):
            raise ValueError(f"OptionDoc({self.name!r}): spark must be {SAME!r}, {DIFFERS!r} or {PYLOG_ONLY!r}")


def known_names(options: Iterable[OptionDoc]) -> dict[str, str]:
    """Lower-cased name -> documented spelling, as :func:`unknown_options` takes them."""
    return {option.name.lower(): option.name for option in options}


def warn_once(message: str) -> None:
    """Log ``message`` as a warning the first time this process sees it. PySpark creates a
    sink's writer again for every micro-batch (and for its commit), in reused Python workers, so
    a warning about a query's options would otherwise repeat with every batch."""
    if message not in _warned:
        _warned.add(message)
        log.warning("%s", message)


def close_match(name: str, known: Iterable[str], cutoff: float = CUTOFF) -> str | None:
    """The known name closest to ``name`` (compared case-insensitively), if it is close."""
    spelled = {k.lower(): k for k in known}
    found = difflib.get_close_matches(name.lower(), list(spelled), n=1, cutoff=cutoff)
    return spelled[found[0]] if found else None


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``" Did you mean X?"`` when a known name is close to ``name``, else ``""``."""
    match = close_match(name, known)
    return f" Did you mean {match}?" if match else ""


def one_of(option: str, value: str, valid: Sequence[str], extra: str = "") -> str:
    """The message for an invalid value: the valid ones, and the closest if it is close.
    ``extra`` describes other accepted forms (e.g. offset JSON)."""
    choices = ", ".join(f"'{v}'" for v in valid[:-1]) + (" or " if len(valid) > 1 else "") + f"'{valid[-1]}'"
    match = close_match(value.strip(), valid, cutoff=VALUE_CUTOFF)  # only a hint: looser
    hint = f" Did you mean '{match}'?" if match else ""
    return f"{option} must be {choices}{extra}, got {value!r}.{hint}"


def unknown_options(
    given: Iterable[str],
    known: Mapping[str, str],
    *,
    what: str,
    error: type[Exception],
    warn: bool,
    ignore: tuple[str, ...] = (),
) -> list[str]:
    """Check option names against ``known`` (lower-cased name -> documented spelling).

    A name close to a known one raises ``error`` with "did you mean"; the others are returned
    and, with ``warn``, logged once each as ignored. Names starting with one of ``ignore``
    (prefixes such as ``kafka.``) are not checked here. ``what`` names the format in messages.
    """
    unknown = []
    for name in given:
        low = name.lower()
        if low in known or low.startswith(ignore):
            continue
        match = close_match(low, known.values())
        if match is not None:
            raise error(
                f"unknown option {name!r} for {what}: did you mean {match}? (option names "
                "are case-insensitive; an unknown option would be ignored)"
            )
        unknown.append(name)
        if warn:
            warn_once(f"{what}: ignoring unknown option {name!r} (not one of its options; Spark ignores it too)")
    return unknown
