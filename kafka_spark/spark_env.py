"""The PySpark this Python imports, checked before pylog's Spark-facing modules import it.

pylog declares no PySpark of its own (setup.cfg; docs/install.md has the command for each
environment): three distributions ship the same top-level package ``pyspark`` (``pyspark``,
Spark itself; ``pyspark-client``, the Spark Connect thin client; ``databricks-connect``), and
clusters bring theirs outside pip, where a requirement would install a second copy over it.
Importing this module (kafka_spark.source, kafka_spark.sink, kafka_spark.lag and kafka_spark.demo
do, before importing pyspark) turns the ways an environment can be wrong into an error naming
the command to run:

* no ``pyspark`` at all (``pip install pyspark-pylog`` into a fresh virtualenv);
* two of those distributions installed over each other: the second overwrote the first's files,
  so the package is a mix of both, and uninstalling either deletes files the other needs;
* a PySpark without Python data sources (``pyspark.sql.datasource``, PySpark 4.0 and later).

The check costs three metadata look-ups (under 10 ms) once per process.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys

from kafka_spark.errors import PylogError

__all__ = ["PYSPARK_DISTRIBUTIONS", "PySparkInstallError", "check_pyspark"]

#: The distributions that install the top-level package ``pyspark``.
PYSPARK_DISTRIBUTIONS = ("pyspark", "pyspark-client", "databricks-connect")

INSTALL_COMMANDS = (
    "  pip install 'pyspark-pylog[spark]'     PySpark with Spark: local sessions, notebooks\n"
    "  pip install 'pyspark-pylog[connect]'   the Spark Connect client (pyspark-client)\n"
    "  pip install pyspark-pylog              where PySpark is there already: cluster nodes, "
    "Databricks, Databricks Connect\n"
    "(docs/install.md: which one, and its exact command)"
)


class PySparkInstallError(PylogError, ImportError):
    """This Python has no PySpark pylog can run on, or two installed over each other."""


def installed_pyspark_distributions() -> dict[str, str]:
    """{distribution: version} of the installed distributions that ship ``pyspark``."""
    found = {}
    for name in PYSPARK_DISTRIBUTIONS:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def check_pyspark() -> None:
    """Raise :class:`PySparkInstallError` naming the fix unless this Python imports one PySpark
    with Python data sources."""
    if importlib.util.find_spec("pyspark") is None:
        raise PySparkInstallError(
            f"pylog's Spark formats need PySpark, and this Python ({sys.executable}) has none. "
            f"Install pylog with the PySpark of your environment:\n{INSTALL_COMMANDS}"
        )
    installed = installed_pyspark_distributions()
    if len(installed) > 1:
        listed = " and ".join(f"{name} {version}" for name, version in installed.items())
        raise PySparkInstallError(
            f"{listed} are installed in this Python ({sys.executable}): each ships the package "
            "`pyspark`, so one overwrote the other's files. Keep one: "
            f"`pip uninstall -y {' '.join(installed)}`, then one of\n{INSTALL_COMMANDS}"
        )
    if importlib.util.find_spec("pyspark.sql.datasource") is None:
        import pyspark

        raise PySparkInstallError(
            f"PySpark {pyspark.__version__} ({pyspark.__file__}) has no Python data sources "
            "(pyspark.sql.datasource, PySpark 4.0 and later), which pylog's formats are. "
            f"Install a supported PySpark:\n{INSTALL_COMMANDS}"
        )


check_pyspark()
