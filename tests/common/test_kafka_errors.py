"""One spelling of Kafka's error codes: kio's ``ErrorCode`` in the broker, and the connector's
small ``kafka_spark.common.kafka_errors.ErrorCode`` (the executors do not load kio) agreeing with it name
for name. A literal error number written back into the broker or the connector's wire clients
fails here, with the file, line and the name to use instead."""

from __future__ import annotations

import ast
import io
import re
import subprocess
import sys
import textwrap
import tokenize
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as KioErrorCode

import kafka_spark
from kafka_spark.common.kafka_errors import ErrorCode, error_name

PACKAGE = Path(kafka_spark.__file__).parent
#: The sources that put Kafka error codes on the wire or read them off it.
SCANNED = sorted(PACKAGE.joinpath("broker").rglob("*.py")) + [
    PACKAGE / "client/fetch_client.py",
    PACKAGE / "cli/group_admin.py",
    PACKAGE / "read/arrow.py",
    PACKAGE / "cli/groups.py",
    PACKAGE / "cli/topics.py",
]
#: (file relative to kafka_spark, line) of literal error numbers accepted on purpose: none.
ALLOWED: frozenset[tuple[str, int]] = frozenset()

_KAFKA_NAMES = {code.name.upper(): code for code in KioErrorCode}
#: Variables that hold one error code in the sources scanned.
_CODE_VARIABLES = {"code", "error", "error_code", "group_error"}


def _holds_code(node: ast.AST) -> bool:
    """``code``, ``error_code``, ``x.error_code``, ``entry["partition_error_code"]``..."""
    if isinstance(node, ast.Name):
        return node.id in _CODE_VARIABLES or node.id.endswith("_error_code")
    if isinstance(node, ast.Attribute):
        return node.attr.endswith("error_code")
    if isinstance(node, ast.Subscript):
        key = node.slice
        return isinstance(key, ast.Constant) and isinstance(key.value, str) and key.value.endswith("error_code")
    return False


def _numbers(node: ast.AST | None) -> list[ast.Constant]:
    """The int literals a value expression can evaluate to (``3``, ``-1``, ``5 if x else 0``)."""
    if node is None:
        return []
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _numbers(node.operand)
    if isinstance(node, ast.Constant):
        return [node] if type(node.value) is int else []
    if isinstance(node, ast.IfExp):
        return _numbers(node.body) + _numbers(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [n for value in node.values for n in _numbers(value)]
    return []


def _is_code_key(node: ast.AST | None) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.endswith("error_code")


def literal_error_numbers(source: str) -> list[tuple[int, str]]:
    """(line, what) for each place ``source`` spells a Kafka error code as a number."""
    found: list[tuple[int, str]] = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                found += [
                    (n.lineno, f"{ast.unparse(key)}: {ast.unparse(value)}")
                    for n in _numbers(value)
                    if _is_code_key(key)
                ]
        elif isinstance(node, ast.keyword) and node.arg is not None and node.arg.endswith("error_code"):
            found += [(n.lineno, f"{node.arg}={ast.unparse(node.value)}") for n in _numbers(node.value)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                pairs = (
                    zip(target.elts, node.value.elts, strict=False)
                    if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple)
                    else [(target, node.value)]
                )
                for name, value in pairs:
                    named = isinstance(name, ast.Name) and name.id.strip("_") in _KAFKA_NAMES
                    if named or _holds_code(name):
                        found += [(n.lineno, f"{ast.unparse(name)} = {ast.unparse(value)}") for n in _numbers(value)]
                    elif (
                        isinstance(name, ast.Name)
                        and re.search(r"ERROR|MESSAGE", name.id)
                        and isinstance(value, ast.Dict)
                    ):  # a table keyed by code: {68: "...", ...}
                        found += [
                            (n.lineno, f"{name.id} = {{{ast.unparse(n)}: ...}}")
                            for key in value.keys
                            for n in _numbers(key)
                        ]
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            if any(_holds_code(o) for o in operands):
                found += [(n.lineno, ast.unparse(node)) for o in operands for n in _numbers(o)]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and len(node.args) == 2
            and _is_code_key(node.args[0])
        ):
            found += [(n.lineno, ast.unparse(node)) for n in _numbers(node.args[1])]
    # A bare number explained by a comment naming the error: ``return 16  # NOT_COORDINATOR``.
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            line = token.line
            match = re.search(r"\b\d+\b[^#]*#\s*([A-Z_]{4,})\b", line)
            if match and match.group(1) in _KAFKA_NAMES:
                found.append((token.start[0], line.strip()))
    return sorted(set(found))


def test_no_kafka_error_number_is_spelled_as_a_literal():
    offenders = []
    for path in SCANNED:
        relative = str(path.relative_to(PACKAGE))
        for line, what in literal_error_numbers(path.read_text()):
            if (relative, line) not in ALLOWED:
                offenders.append(f"kafka_spark/{relative}:{line}: {what}")
    assert offenders == [], (
        "Kafka error codes are spelled ErrorCode.<name> (kio.schema.errors in the "
        "broker, kafka_spark.common.kafka_errors in the connector):\n" + "\n".join(offenders)
    )


@pytest.mark.parametrize(
    "source",
    [
        '{"error_code": 3}',
        '{"partition_error_code": 5 if offline else ErrorCode.none}',
        "result.update(error_code=42)",
        "_KAFKA_STORAGE_ERROR = 56",
        "UNKNOWN_TOPIC_ID, X = 100, 1",
        "class E:\n    error_code = -1",
        'entry["error_code"] = 1',
        "if code == 0:\n    pass",
        'response.get("error_code", 0)',
        "return_value = 16  # NOT_COORDINATOR",
        '_MESSAGES = {68: "The group {} is not empty", 69: "Group {} not found."}',
        'RETRIABLE_ERRORS = {5: "LEADER_NOT_AVAILABLE"}',
    ],
)
def test_the_scan_catches_each_spelling(source):
    assert literal_error_numbers(textwrap.dedent(source)) != []


@pytest.mark.parametrize(
    "source",
    [
        '{"error_code": ErrorCode.none, "throttle_time": 0, "generation_id": -1}',
        "code = ErrorCode.unknown_topic_id if name is None else ErrorCode.none",
        "MAX_IN_FLIGHT = 64",
        "if code:\n    pass",
        "width = 30 if version >= 5 else 22",
        'CODEC_NAMES = {0: "none", 1: "gzip"}',
        "reader.i32()  # throttle_time_ms",
    ],
)
def test_the_scan_leaves_other_numbers_alone(source):
    assert literal_error_numbers(source) == []


def test_the_connectors_names_are_kios():
    mismatched = [
        (code.name, int(code))
        for code in ErrorCode
        if code.name not in KioErrorCode.__members__ or KioErrorCode[code.name] != code
    ]
    assert mismatched == [], "kafka_spark/common/kafka_errors.py disagrees with kio.schema.errors.ErrorCode"
    assert len(ErrorCode) >= 20


def test_the_fetcher_retries_only_codes_kafka_calls_retriable():
    from kafka_spark.client.fetch_client import RETRIABLE_ERRORS

    assert RETRIABLE_ERRORS[ErrorCode.leader_not_available] == "LEADER_NOT_AVAILABLE"
    assert [name for code, name in RETRIABLE_ERRORS.items() if not KioErrorCode(code).retriable] == []


def test_error_names_are_kafkas():
    assert error_name(ErrorCode.leader_not_available) == "LEADER_NOT_AVAILABLE"
    assert error_name(56) == "KAFKA_STORAGE_ERROR"
    assert error_name(30000) == "30000"  # a code newer than this client


def test_the_connectors_error_codes_do_not_load_kio():
    loaded = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys, kafka_spark.client.fetch_client, kafka_spark.cli.group_admin; "
            "print(sorted(m for m in sys.modules if m.startswith(('kio', 'kafka_spark.broker'))))",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=PACKAGE.parent,
    ).stdout.strip()
    assert loaded == "[]"
