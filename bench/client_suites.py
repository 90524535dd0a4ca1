"""Kafka clients' own integration suites against pylog's broker and Apache Kafka 4.3.1, side by side.

Runs the test suites of aiokafka, kafka-python and confluent-kafka-python (their own test code,
at the release of the client installed here) once against a fresh pylog broker and once against
a fresh Apache Kafka 4.3.1 node (tests/interop/references.py) with the same settings, in one
session, and prints per suite how many tests passed, failed, errored and were skipped on each
broker, and every test whose outcome differs::

    python bench/client_suites.py \\
        --source aiokafka=/path/to/aiokafka/.git \\
        --source kafka-python=/path/to/kafka-python/.git \\
        --source confluent-kafka-python=/path/to/confluent-kafka-python/.git

A source is a git directory (or a clone) of the client's repository; its tests are exported with
``git archive`` from the newest release tag not above the installed client's version (``--ref
NAME=REF`` picks another) into the work directory (``--work``, default ``.cache/client-suites``,
which git ignores): nothing of the clients' code enters this repository. Only the tests and the
files holding their pytest settings are exported, never the client's package, so the tests run
against the installed client. They run in a virtualenv of their own (made in the work directory
on the first run) that sees this project's packages and adds the pytest plugins the suites need
(pytest-asyncio, pytest-mock, pytest-timeout, trivup: ``pip install`` from PyPI); ``--no-install``
uses this interpreter as it is.

How each suite reaches the broker, as its own CI does with an external broker:

- aiokafka (its whole ``tests/`` folder; 2 partitions per auto-created topic, as its Docker image
  sets): its Docker fixtures are replaced, in the exported copy of ``tests/conftest.py``, by ones
  naming the broker; the image tag gates the tests as Kafka 4.3.1. Its SSL, SASL, Kerberos and
  ACL tests need the Docker image's listeners and tools, which neither broker has here: they
  fail alike on both.
- kafka-python (``test/integration``; 4 partitions): ``KAFKA_URI``, ``KAFKA_VERSION=4.3.1`` and
  ``KAFKA_ROOT`` (Kafka's jars, scripts/fetch_references.sh).
- confluent-kafka-python (the Kafka tests of ``tests/integration``: ``admin``, ``consumer`` and
  ``producer``; not the Schema Registry, serialization and share-group ones, which need a Schema
  Registry, protobuf and KIP-932 share groups): ``BROKERS``; run twice, with the classic group
  protocol and with KIP-848's (``TEST_CONSUMER_GROUP_PROTOCOL=consumer``), as its CI runs it, on
  brokers with an ACL authorizer (its admin tests create ACLs) under which the tests' anonymous
  clients are super users.

Both brokers: one node, node id 0 (the suites place replicas on broker 0), auto-created topics,
``group.initial.rebalance.delay.ms=0``, and a group heartbeat of 1 s for KIP-848 groups (as the
interop fixtures set them). ``--repeat N`` runs the tests whose outcome differs N more times on
each broker (fresh brokers again), to tell a difference that always shows from one that comes and
goes; ``-k`` selects tests as pytest's ``-k`` does, in every suite. A report (``report.json``) and
each run's pytest output and JUnit XML are kept in the work directory.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import json
import os
import shutil
import site
import subprocess
import sys
import time
import xml.etree.ElementTree as ElementTree
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT))
from _harness import pylog_broker_process  # noqa: E402

KAFKA_VERSION = "4.3.1"
COMMON_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.consumer.heartbeat.interval.ms": "1000"}

# Appended to the exported copy of aiokafka's tests/conftest.py: later definitions of a fixture
# replace earlier ones, so these take the place of the fixtures that start Kafka in Docker.
_AIOKAFKA_FIXTURES = """

# -- added by pylog's bench/client_suites.py: the broker under test instead of a Docker container --


@pytest.fixture(scope="session")
def docker(request):
    yield None


@pytest.fixture(scope="session")
def kafka_image(request):
    return request.config.getoption("--docker-image")


@pytest.fixture(scope="session")
def ssl_folder(tmp_path_factory):
    return tmp_path_factory.mktemp("ssl_cert")  # no certificates: the SSL tests fail on every broker


@pytest.fixture(scope="session")
def kafka_server(kafka_image, docker, unused_port):
    host, port = os.environ["PYLOG_SUITE_BOOTSTRAP"].rsplit(":", 1)
    yield KafkaServer(host, int(port), unused_port(), unused_port(), unused_port(), None)


@pytest.fixture(scope="class")
def acl_manager(kafka_server, request):
    return None


@pytest.fixture(scope="class")
def kafka_config(kafka_server, request):
    return None


@pytest.fixture(scope="class")
def kerberos_utils(kafka_server):
    return None
"""


@dataclass(frozen=True)
class Suite:
    """One client's suite: where its tests are, what to export, and how they find the broker."""

    name: str
    distribution: str  # the installed package whose version picks the release tag
    exported: tuple[str, ...]  # paths of the repository to export (tests and pytest settings)
    paths: tuple[str, ...]  # the tests to run
    partitions: int  # num.partitions of both brokers
    env: Callable[[str], dict[str, str]]
    arguments: tuple[str, ...] = ()
    prepare: Callable[[Path], None] | None = None
    #: runs of the suite under other settings: label -> extra environment (one run by default)
    variants: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (("", ()),)
    #: broker settings beyond COMMON_SETTINGS (both brokers)
    settings: tuple[tuple[str, str], ...] = ()


def _prepare_aiokafka(checkout: Path) -> None:
    conftest = checkout / "tests" / "conftest.py"
    text = conftest.read_text()
    if "added by pylog's bench/client_suites.py" not in text:
        conftest.write_text(text + _AIOKAFKA_FIXTURES)


SUITES = {
    suite.name: suite
    for suite in (
        Suite(
            "aiokafka",
            "aiokafka",
            ("tests", "pyproject.toml"),
            ("tests",),
            2,
            lambda bootstrap: {"PYLOG_SUITE_BOOTSTRAP": bootstrap},
            ("--docker-image", f"pylog-client-suites/kafka:{KAFKA_VERSION}", "--no-pull"),
            prepare=_prepare_aiokafka,
        ),
        Suite(
            "kafka-python",
            "kafka-python",
            ("test", "pyproject.toml"),
            ("test/integration",),
            4,
            lambda bootstrap: {
                "KAFKA_URI": f"PLAINTEXT://{bootstrap}",
                "KAFKA_VERSION": KAFKA_VERSION,
                # its fixtures want a Kafka distribution even for an external broker: Kafka's jars
                "KAFKA_ROOT": str(ROOT / ".cache" / "kafka"),
            },
        ),
        Suite(
            "confluent-kafka-python",
            "confluent-kafka",
            ("tests", "pyproject.toml"),
            ("tests/integration/admin", "tests/integration/consumer", "tests/integration/producer"),
            1,
            lambda bootstrap: {"BROKERS": bootstrap},
            # as its CI runs them: with the classic group protocol, and with KIP-848's
            variants=(("classic", ()), ("consumer", (("TEST_CONSUMER_GROUP_PROTOCOL", "consumer"),))),
            # its admin tests create and describe ACLs: an authorizer, which lets the tests' own
            # (anonymous) clients do everything
            settings=(
                ("authorizer.class.name", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
                ("super.users", "User:ANONYMOUS"),
            ),
        ),
    )
}

#: What the suites' pytest settings and imports need beyond this project's test extra: pytest and
#: its plugins at the versions aiokafka's CI pins (its pytest settings turn warnings into errors,
#: and newer versions warn of deprecations), trivup (imported by confluent-kafka-python's fixtures)
#: and avro (by its Avro helpers).
PLUGINS = ("pytest==9.0.2", "pytest-asyncio==1.3.0", "pytest-mock==3.15.1", "pytest-timeout", "trivup", "avro")


@dataclass
class Run:
    """One suite's results on one broker: test id -> outcome (and the failure's first line)."""

    outcomes: dict[str, str] = field(default_factory=dict)
    messages: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0

    def count(self, outcome: str) -> int:
        return sum(1 for found in self.outcomes.values() if found == outcome)

    def summary(self) -> str:
        return ", ".join(f"{self.count(kind)} {kind}" for kind in ("passed", "failed", "error", "skipped"))


# -- the clients' tests, exported ------------------------------------------------------------------


def release_ref(source: Path, installed: str) -> str:
    """The newest release tag of ``source`` not above the ``installed`` version (HEAD if none)."""
    from packaging.version import InvalidVersion, Version

    tags = subprocess.run(
        ["git", f"--git-dir={_git_dir(source)}", "tag"], capture_output=True, text=True, check=True
    ).stdout.split()
    best: tuple[Version, str] | None = None
    for tag in tags:
        try:
            version = Version(tag.removeprefix("v"))
        except InvalidVersion:
            continue
        if version.is_prerelease or version.is_devrelease or version > Version(installed):
            continue
        if best is None or version > best[0]:
            best = (version, tag)
    return best[1] if best else "HEAD"


def _git_dir(source: Path) -> Path:
    return source / ".git" if (source / ".git").exists() else source


def export(source: Path, ref: str, paths: tuple[str, ...], target: Path) -> Path:
    """``paths`` of ``source`` at ``ref`` into ``target`` (once; an existing export is kept)."""
    if (target / ".exported").exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    archive = subprocess.Popen(
        ["git", f"--git-dir={_git_dir(source)}", "archive", "--format=tar", ref, "--", *paths], stdout=subprocess.PIPE
    )
    subprocess.run(["tar", "-x", "-C", str(target)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise RuntimeError(f"git archive of {ref} from {source} failed")
    (target / ".exported").write_text(f"{source} {ref}\n")
    return target


# -- the interpreter the suites run in ----------------------------------------------------------------


def suites_python(work: Path, install: bool) -> str:
    """A virtualenv in ``work`` that sees this project's packages (a .pth file naming its
    site-packages) and has the suites' pytest plugins; or this interpreter with ``install`` off."""
    if not install:
        return sys.executable
    venv = work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        own = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        Path(own, "pylog-project.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    missing = [
        plugin
        for plugin in PLUGINS
        if subprocess.run([str(python), "-m", "pip", "show", "-q", plugin], capture_output=True, check=False).returncode
    ]
    if missing:
        subprocess.run([str(python), "-m", "pip", "install", "-q", *missing], check=True)
    return str(python)


# -- the brokers ----------------------------------------------------------------------------------


@contextlib.contextmanager
def broker(kind: str, suite: Suite) -> Iterator[str]:
    """A fresh broker of ``kind`` ("pylog" or "kafka") with the common settings and ``suite``'s:
    its bootstrap servers."""
    partitions = suite.partitions
    settings = {**COMMON_SETTINGS, "num.partitions": str(partitions), **dict(suite.settings)}
    if kind == "pylog":
        overrides = tuple(f"{key}={value}" for key, value in settings.items())
        with pylog_broker_process(partitions=partitions, overrides=overrides) as address:
            yield str(address)
    else:
        from tests.interop.references import ApacheKafka

        with ApacheKafka(heap="1g", node_id=0, overrides=settings) as kafka:
            yield kafka.bootstrap_servers


# -- running a suite ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """What every run of this session shares."""

    python: str
    work: Path
    keyword: str | None
    timeout: bool  # pytest-timeout is there (the suites' virtualenv)


def run_suite(
    session: Session, suite: Suite, checkout: Path, env: dict[str, str], log: Path, selected: list[str]
) -> Run:
    """pytest on ``suite`` (or on the ``selected`` test ids) with ``env``; its output goes to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    junit = log.with_suffix(".xml")
    command = [session.python, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:pylog", f"--junitxml={junit}", "-q"]
    if session.timeout:
        command += ["--timeout", "300"]  # pytest-timeout: a hung test fails instead of stalling the run
    command += list(suite.arguments)
    if session.keyword and not selected:
        command += ["-k", session.keyword]
    command += selected or list(suite.paths)
    full_env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTEST_ADDOPTS")}
    full_env.update(env)
    started = time.monotonic()
    junit.unlink(missing_ok=True)
    with open(log, "w") as output:
        subprocess.run(command, cwd=checkout, env=full_env, stdout=output, stderr=subprocess.STDOUT, check=False)
    run = parse_junit(junit) if junit.exists() else Run()
    run.seconds = time.monotonic() - started
    return run


def compare(
    session: Session, suite: Suite, checkout: Path, label: str, extra: dict[str, str], brokers: list[str], repeat: int
) -> dict:
    """One run of ``suite`` on each broker (fresh ones), the differing tests run ``repeat`` times
    more; prints the counts and the differences, and returns them for the report."""
    runs: dict[str, Run] = {}
    for kind in brokers:
        with broker(kind, suite) as bootstrap:
            log = session.work / "runs" / f"{label}-{kind}.log"
            runs[kind] = run_suite(session, suite, checkout, {**suite.env(bootstrap), **extra}, log, [])
    for kind, run in runs.items():
        print(f"  {kind:<6} {run.summary()}  ({run.seconds:.0f} s)")
    entry: dict = {"runs": {kind: run.outcomes for kind, run in runs.items()}}
    if len(runs) < 2:
        return entry
    differing = differences(runs["pylog"], runs["kafka"])
    unmatched = set(runs["pylog"].outcomes) ^ set(runs["kafka"].outcomes)
    if unmatched:
        print(f"  {len(unmatched)} test id(s) ran on one broker only (parameters drawn at random): not compared")
    repeats: dict[str, dict[str, int]] = {}
    if differing and repeat:
        ids = [node_id(test, checkout) for test in differing]
        for kind in brokers:
            for round_ in range(repeat):
                with broker(kind, suite) as bootstrap:
                    log = session.work / "runs" / f"{label}-{kind}-repeat{round_}.log"
                    again = run_suite(session, suite, checkout, {**suite.env(bootstrap), **extra}, log, ids)
                for test in differing:
                    passed = repeats.setdefault(test, {}).setdefault(kind, 0)
                    repeats[test][kind] = passed + (again.outcomes.get(test) == "passed")
    print(f"  {len(differing)} test(s) differ:" if differing else "  no test differs")
    for test in differing:
        line = f"    {test}: pylog {runs['pylog'].outcomes.get(test, 'not run')}, "
        line += f"kafka {runs['kafka'].outcomes.get(test, 'not run')}"
        if test in repeats:
            line += " | passed again: " + ", ".join(f"{kind} {n}/{repeat}" for kind, n in repeats[test].items())
        print(line)
        for kind in ("pylog", "kafka"):
            message = runs[kind].messages.get(test)
            if message and runs[kind].outcomes.get(test) in ("failed", "error"):
                print(f"      {kind}: {message}")
    entry.update(differences=differing, repeats=repeats)
    return entry


def parse_junit(path: Path) -> Run:
    """Outcomes by test id (``module.Class::name``) from pytest's JUnit XML."""
    run = Run()
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        outcome, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[child.tag]
                message = (child.get("message") or "").splitlines()[0][:240] if child.get("message") else ""
                break
        if run.outcomes.get(test) in ("failed", "error") and outcome == "error":
            continue  # a teardown error after a failed call: the call's outcome is what counts
        run.outcomes[test] = outcome
        run.messages[test] = message
    return run


def node_id(test: str, checkout: Path) -> str:
    """The pytest node id (``path/to/test_x.py::Class::name``) of a JUnit test id."""
    dotted, name = test.split("::", 1)
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        path = Path(*parts[:cut]).with_suffix(".py")
        if (checkout / path).exists():
            return "::".join([str(path), *parts[cut:], name])
    return test


def differences(pylog: Run, kafka: Run) -> list[str]:
    """Tests that ran on both brokers and passed on one only (a skip is not a run). A test id
    found in one run only is not compared: some suites draw their parameters at random."""
    tests = sorted(set(pylog.outcomes) & set(kafka.outcomes))
    return [
        test
        for test in tests
        if (pylog.outcomes[test] == "passed") != (kafka.outcomes[test] == "passed")
        and "skipped" not in (pylog.outcomes[test], kafka.outcomes[test])
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", action="append", default=[], metavar="SUITE=GIT_DIR", required=True)
    parser.add_argument("--ref", action="append", default=[], metavar="SUITE=REF", help="a tag or commit to test at")
    parser.add_argument("--work", type=Path, default=ROOT / ".cache" / "client-suites")
    parser.add_argument("--brokers", default="pylog,kafka", help="pylog, kafka or both (comma-separated)")
    parser.add_argument("-k", dest="keyword", help="pytest's -k, in every suite")
    parser.add_argument("--repeat", type=int, default=0, help="run each differing test N more times")
    parser.add_argument("--no-install", dest="install", action="store_false")
    args = parser.parse_args(argv)

    sources = dict(item.split("=", 1) for item in args.source)
    refs = dict(item.split("=", 1) for item in args.ref)
    unknown = (set(sources) | set(refs)) - set(SUITES)
    if unknown:
        parser.error(f"unknown suite(s) {', '.join(sorted(unknown))}: the suites are {', '.join(SUITES)}")
    brokers = [kind.strip() for kind in args.brokers.split(",") if kind.strip()]
    if not brokers or set(brokers) - {"pylog", "kafka"}:
        parser.error("--brokers takes pylog, kafka or pylog,kafka")
    args.work.mkdir(parents=True, exist_ok=True)
    session = Session(suites_python(args.work, args.install), args.work, args.keyword, args.install)

    report: dict[str, dict] = {}
    for name, source in sources.items():
        suite = SUITES[name]
        installed = importlib.metadata.version(suite.distribution)
        ref = refs.get(name) or release_ref(Path(source), installed)
        checkout = export(Path(source), ref, suite.exported, args.work / f"{name}-{ref}")
        if suite.prepare is not None:
            suite.prepare(checkout)
        for variant, extra in suite.variants:
            label = f"{name} ({variant})" if variant else name
            print(f"{label} {installed} (tests at {ref}):")
            entry = compare(session, suite, checkout, label.replace(" ", ""), dict(extra), brokers, args.repeat)
            report[label] = {"installed": installed, "ref": ref, **entry}
    (args.work / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
