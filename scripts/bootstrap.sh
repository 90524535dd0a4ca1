#!/usr/bin/env bash
# Installs what a job needs on a fresh Debian machine, in two levels:
#   bootstrap.sh demo   `make demo`: Java 17 (Spark's JVM) and a virtualenv .venv holding pylog
#                       with PySpark (extra `spark`);
#   bootstrap.sh test   `make test`, `make lint`, `make docs`, `make dist` (the default): also the
#                       JDK (the interop tests compile small Java clients), Maven and kcat (client
#                       compatibility tests and benchmarks), the test, lint, docs and release extras, and
#                       Apache Kafka and Spark's Kafka connector from Maven Central
#                       (scripts/fetch_references.sh).
# Idempotent: each step is skipped when its result is already there, and a test-level .venv
# serves the demo.
set -euo pipefail
cd "$(dirname "$0")/.."
level=${1:-test}
case "$level" in
  demo | test) ;;
  *) echo "usage: $0 [demo|test]" >&2; exit 2 ;;
esac

apt_install() {
  if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@"
}

need=()
if [ "$level" = demo ]; then
  if ! command -v java >/dev/null 2>&1; then need+=(openjdk-17-jre-headless); fi
else
  if ! command -v javac >/dev/null 2>&1; then need+=(openjdk-17-jdk-headless); fi
  if ! command -v mvn >/dev/null 2>&1; then need+=(maven); fi
  if ! command -v kcat >/dev/null 2>&1; then need+=(kcat); fi
fi
if [ "${#need[@]}" -gt 0 ]; then
  echo "bootstrap: installing ${need[*]} with apt"
  apt_install "${need[@]}"
fi

# The interpreter of .venv. pylog's broker is CPU-bound Python, so the interpreter's build matters:
# the CPython of Linux distributions (Debian, Ubuntu, Fedora), python.org's and the official
# container images' is built with profile-guided and link-time optimization; pyenv's default build
# is not (and links a shared libpython), and ran the broker's produce path ~15% slower on the
# same machine (README, "Which Python runs the broker"). PYLOG_PYTHON names an interpreter;
# otherwise the system's /usr/bin/python3 when it is 3.11 or later and can make a virtualenv,
# else python3 on PATH. An existing .venv is kept (`make clean` removes it).
choose_python() {
  if [ -n "${PYLOG_PYTHON:-}" ]; then
    echo "$PYLOG_PYTHON"
    return
  fi
  local candidate
  for candidate in /usr/bin/python3 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
        && "$candidate" -c 'import ensurepip, sys, venv; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
      echo "$candidate"
      return
    fi
  done
  echo python3
}

if [ ! -x .venv/bin/python ]; then
  python=$(choose_python)
  echo "bootstrap: creating .venv with $python ($("$python" -c 'import platform; print("Python", platform.python_version())'))"
  "$python" -m venv .venv
fi
# One stamp per level, newer than what the install reads: setup.py and the C source too (the install
# builds kafka_spark/cli/_console_values.c, optional, in place, with its generated header).
if [ "$level" = demo ]; then extras=spark; else extras=spark,test,lint,docs,release; fi
installed() {  # installed LEVEL: that level's install is newer than what it reads
  local stamp=".venv/.pylog-installed-$1"
  [ -f "$stamp" ] && [ ! setup.cfg -nt "$stamp" ] && [ ! setup.py -nt "$stamp" ] \
    && [ ! kafka_spark/cli/_console_values.c -nt "$stamp" ] \
    && [ ! kafka_spark/cli/_record_layout.h -nt "$stamp" ]
}
if ! installed test && ! { [ "$level" = demo ] && installed demo; }; then
  echo "bootstrap: installing pylog with its extras [$extras] into .venv"
  .venv/bin/python -m pip install -q --upgrade pip
  # The distribution was named "pylog" before it became pyspark-pylog: remove that old install
  # (recognised by its summary; "pylog" on the package index is another project).
  old_install=$(.venv/bin/python -m pip show pylog 2>/dev/null || true)
  if [[ "$old_install" == *"Summary: PySpark-native"* ]]; then
    .venv/bin/python -m pip uninstall -q -y pylog
    rm -rf pylog.egg-info
  fi
  # An extension built in place before it used Python's limited API keeps a name that imports
  # ahead of the new one (.cpython-3XX-*.so before .abi3.so).
  rm -f kafka_spark/cli/_console_values.cpython-*.so
  # compat mode: Spark finds data sources by listing top-level `pyspark_*` modules
  # (pkgutil.iter_modules), which setuptools' default editable finder hides.
  .venv/bin/python -m pip install -q -e ".[$extras]" --config-settings editable_mode=compat
  rm -f .venv/.pylog-installed .venv/.pylog-installed-*
  touch ".venv/.pylog-installed-$level"
fi

if [ "$level" = test ]; then
  bash scripts/fetch_references.sh
fi
