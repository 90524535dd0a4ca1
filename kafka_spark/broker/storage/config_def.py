"""Kafka's ``ConfigDef`` as topic configs use it: how a config's string value is parsed, checked
and written back, so that pylog accepts exactly the values Apache Kafka 4.3 accepts and describes
them as Kafka describes them (``retention.ms=+5`` is stored and described as ``5``,
``min.cleanable.dirty.ratio=1e-4`` as ``1.0E-4``, ``cleanup.policy= compact , delete`` as
``compact,delete``).

Written by hand: the rules are Java's (``Integer.parseInt``, ``Double.parseDouble``,
``Double.toString``, ``String.trim``), which Python's ``int`` and ``float`` do not follow
(``int("1_000")`` and ``float("nan")`` parse; Java refuses both), and no library reproduces them.

A check that fails raises :class:`ConfigValueError` with Kafka's own message
(``Invalid value -1 for configuration segment.ms: Value must be at least 1``).
"""

from __future__ import annotations

import enum
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

INT_MIN, INT_MAX = -(2**31), 2**31 - 1
LONG_MIN, LONG_MAX = -(2**63), 2**63 - 1


class ConfigType(enum.IntEnum):
    """``ConfigDef.Type``, numbered as DescribeConfigs v3+ reports it."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


class ConfigValueError(ValueError):
    """A value Kafka refuses; ``str()`` is Kafka's message for it."""


def invalid(name: str, value: object, reason: str) -> ConfigValueError:
    return ConfigValueError(f"Invalid value {value} for configuration {name}: {reason}")


# -- parsing (ConfigDef.parseType) ------------------------------------------------------------------

_JAVA_WHITESPACE = "".join(chr(code) for code in range(33))  # String.trim(): every char <= ' '
_INTEGER = re.compile(r"[+-]?\d+")  # Character.digit(c, 10): any Unicode decimal digit
_DECIMAL_DOUBLE = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?)[fFdD]?")
_HEX_DOUBLE = re.compile(r"([+-]?0[xX]([0-9a-fA-F]+\.?|[0-9a-fA-F]*\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")
_LIST_SEPARATOR = re.compile(r"\s*,\s*")


def java_trim(raw: str) -> str:
    return raw.strip(_JAVA_WHITESPACE)


def parse(name: str, kind: ConfigType, raw: str) -> Any:
    """The value of ``raw`` as Kafka's ConfigDef parses a config of type ``kind``: bool, int,
    float, str or list of str."""
    text = java_trim(raw)
    if kind is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise invalid(name, text, "Expected value to be either true or false")
    if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        low, high = {
            ConfigType.SHORT: (-(2**15), 2**15 - 1),
            ConfigType.INT: (INT_MIN, INT_MAX),
            ConfigType.LONG: (LONG_MIN, LONG_MAX),
        }[kind]
        if _INTEGER.fullmatch(text) and low <= (number := int(text)) <= high:
            return number
        raise invalid(name, text, f"Not a number of type {kind.name}")
    if kind is ConfigType.DOUBLE:
        return _java_double(name, text)
    if kind is ConfigType.LIST:
        return [] if not text else _LIST_SEPARATOR.split(text)
    return text


def _java_double(name: str, text: str) -> float:
    """``Double.parseDouble``: decimal and hexadecimal forms, an optional f/d suffix, NaN and
    Infinity spelled as Java spells them."""
    if _DECIMAL_DOUBLE.fullmatch(text):
        body = text.rstrip("fFdD")
        return float(body)  # "NaN" / "Infinity" included: Python reads Java's spellings too
    hex_form = _HEX_DOUBLE.fullmatch(text)
    if hex_form:
        return float.fromhex(hex_form.group(1))
    raise invalid(name, text, "Not a number of type DOUBLE")


# -- writing back (ConfigDef.convertToString) -------------------------------------------------------


def to_string(kind: ConfigType, value: Any) -> str:
    """The string Kafka shows for a parsed value (DescribeConfigs, CreateTopics v5+)."""
    if kind is ConfigType.BOOLEAN:
        return "true" if value else "false"
    if kind is ConfigType.DOUBLE:
        return java_double_string(value)
    if kind is ConfigType.LIST:
        return ",".join(value)
    return str(value)


def java_double_string(value: float) -> str:
    """``Double.toString``: plain notation with at least one fraction digit for magnitudes in
    [10^-3, 10^7), "computerized scientific notation" (``1.0E-4``) otherwise."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(magnitude)  # the shortest digits; plain notation in this range
        return sign + (text if "." in text else text + ".0")
    digits_tuple = Decimal(repr(magnitude)).normalize().as_tuple()
    digits = "".join(str(digit) for digit in digits_tuple.digits)
    exponent = int(digits_tuple.exponent) + len(digits) - 1
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# -- validators (ConfigDef.Range, ValidString, ValidList and Kafka's own) ---------------------------


Validator = Callable[[str, Any], Any]  # (name, parsed value) -> the value to keep; raises ConfigValueError


def at_least(minimum: float) -> Validator:
    def check(name: str, value: Any) -> Any:
        if value < minimum:
            raise invalid(name, value, f"Value must be at least {_number(minimum)}")
        return value

    return check


def between(minimum: float, maximum: float, *, or_equal: int | None = None) -> Validator:
    def check(name: str, value: Any) -> Any:
        if value == or_equal:
            return value
        if or_equal is not None and not minimum <= value <= maximum:
            reason = f"Value must be between {_number(minimum)} and {_number(maximum)} or equal to {or_equal}"
            raise invalid(name, value, reason)
        if value < minimum:
            raise invalid(name, value, f"Value must be at least {_number(minimum)}")
        if value > maximum:
            raise invalid(name, value, f"Value must be no more than {_number(maximum)}")
        return value  # NaN passes, as it passes Kafka's comparisons

    return check


def one_of(*allowed: str) -> Validator:
    """ValidString.in: case-sensitive."""

    def check(name: str, value: str) -> str:
        if value not in allowed:
            raise invalid(name, value, f"String must be one of: {', '.join(allowed)}")
        return value

    return check


def list_of(*allowed: str) -> Validator:
    """ValidList.in: no empty item, every item one of ``allowed``; a repeated item is kept once
    (Kafka logs a warning), in the order first given. The empty list is valid."""

    def check(name: str, items: Sequence[str]) -> list[str]:
        if any(item == "" for item in items):
            raise ConfigValueError(f"Configuration '{name}' values must not be empty.")
        for item in items:
            if item not in allowed:
                raise invalid(name, item, f"String must be one of: {', '.join(allowed)}")
        return list(dict.fromkeys(items))

    return check


_REPLICA = re.compile(r"([0-9]+:[0-9]+)?")


def throttled_replicas(name: str, items: Sequence[str]) -> list[str]:
    """ThrottledReplicaListValidator (Kafka 4.3): every item empty or ``partition:broker``, or the
    items joined make ``*``."""
    trimmed = [java_trim(item) for item in items]
    if all(_REPLICA.fullmatch(item) for item in trimmed) or "".join(trimmed) == "*":
        return list(items)
    raise invalid(
        name,
        "[" + ", ".join(items) + "]",
        f"{name} must be the literal '*' or a list of replicas in the following format: "
        "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
    )


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


@dataclass(frozen=True)
class ConfigKey:
    """One config: its name, type, Kafka's default (as Kafka writes it) and validator."""

    name: str
    type: ConfigType
    default: str
    validator: Validator | None = None
    internal: bool = False

    def parse(self, raw: str) -> Any:
        """The checked value of ``raw`` (ConfigValueError if Kafka refuses it)."""
        value = parse(self.name, self.type, raw)
        return self.validator(self.name, value) if self.validator is not None else value

    def normalize(self, raw: str) -> str:
        """``raw`` as Kafka stores and describes it (ConfigValueError if Kafka refuses it)."""
        return to_string(self.type, self.parse(raw))
