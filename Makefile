# The two commands of the README. Both create .venv and install what is missing first: the demo
# what it needs (Java, pylog with PySpark), the tests and lint also their tools and references
# (scripts/bootstrap.sh).
PY := .venv/bin/python
PYTEST_ARGS ?=
# `make test` runs the suite in two pytest-xdist workers, a test file per worker at a time (the
# tests of a file share their module fixtures): on two cores most tests wait on a JVM, a broker or a
# subprocess, so two workers finish the suite in about two thirds of the time (CHANGES.md).
# TEST_WORKERS=0 runs it in one process.
TEST_WORKERS ?= 2

.PHONY: demo test test-matrix lint lint-imports docs bootstrap bootstrap-demo bench bench-plots bench-plots-long dist clean

bootstrap:
	@bash scripts/bootstrap.sh test

bootstrap-demo:
	@bash scripts/bootstrap.sh demo

demo: bootstrap-demo
	$(PY) -m kafka_spark.demo

test: bootstrap
	$(PY) -m pytest -q --durations=25 -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The installed wheel with the newest patch of PySpark 4.0, 4.1 and 4.2, a virtualenv each (kept in
# ~/.cache/pylog/matrix, shared by the checkouts of this machine), against the Spark-facing tests of scripts/test_matrix.py (MATRIX_TESTS), or the
# pytest arguments in MATRIX_ARGS; MATRIX_PYSPARK picks the releases. A table per release at the end.
MATRIX_PYSPARK ?= 4.0.5 4.1.4 4.2.1
MATRIX_ARGS ?=
test-matrix: bootstrap
	$(PY) scripts/test_matrix.py --connect --pyspark $(MATRIX_PYSPARK) $(if $(MATRIX_ARGS),-- $(MATRIX_ARGS))

# The layering contracts of setup.cfg ([importlinter]); tests/test_layout_imports.py runs them in `make test`.
lint-imports: bootstrap
	.venv/bin/lint-imports --no-cache

# ruff (rules and formatting) over every Python file of the repository and mypy over the package;
# the settings are in pyproject.toml. CI runs it before the tests (.ci/run).
lint: lint-imports
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

# The documentation site (docs/, Sphinx with Markdown pages): warnings are errors, so a broken link,
# page, anchor or docstring fails the build. CI runs it (.ci/run); the pages' code blocks run in
# `make test` (tests/test_docs_code.py). The reference tables are written from the code as it
# starts (docs/_ext/pylog_reference.py).
docs: bootstrap
	.venv/bin/sphinx-build -q -E -W --keep-going -b html docs docs/_build/html

# The release artifacts in dist/: the sdist, the pure wheel and this platform's abi3 wheel
# (scripts/build_dist.py; tests/test_install.py installs them).
dist: bootstrap
	$(PY) scripts/build_dist.py

bench: bootstrap
	$(PY) bench/broker_throughput.py

# The benchmarks' data and plots of docs/benchmarks.md: each script writes every round's figures as
# JSON into docs/benchmarks/, and bench/plot.py draws each comparison from it as SVG beside it; both
# are checked in. Sizes that finish in minutes on 2 cores; tests/bench/test_source_throughput.py
# runs the JSON -> plot path on a tiny run in `make test`.
bench-plots: bootstrap
	$(PY) bench/source_throughput.py --parts latency,kafka --messages 1000000 --rounds 5 \
		--latency-messages 2000 --latency-rounds 5 --json docs/benchmarks/source.json
	$(PY) bench/sink_throughput.py --parts kafka,topic --topic-rows 500000 --repeats 5 --kafka-warmup 4 \
		--json docs/benchmarks/sink.json
	$(PY) bench/cluster_failover.py --messages 30000 --rounds 3 --kills 10 --json docs/benchmarks/cluster.json
	$(PY) bench/plot.py docs/benchmarks/*.json --out docs/benchmarks

# The two longer ones: pylog's broker against Apache Kafka (kcat and Kafka's Java perf tools;
# tests/interop/test_benchmarks.py runs it tiny; 23 min at load 8-14 on 2 cores) and the partition
# sweep against Spark's source (a task per partition: minutes a read at 256; 9 min at load 9-14).
bench-plots-long: bootstrap
	$(PY) bench/broker_throughput.py --messages 1000000 --java-messages 3000000 --rounds 3 --warmup 1 \
		--consume-runs 5 --java-consume-runs 3 --json docs/benchmarks/broker.json
	$(PY) bench/source_throughput.py --parts sweep --sweep-even --sweep-rows 200000 \
		--sweep-partitions 1,8,64,256 --rounds 2 --json docs/benchmarks/source-partitions.json
	$(PY) bench/plot.py docs/benchmarks/*.json --out docs/benchmarks

clean:
	rm -rf .venv build *.egg-info .mypy_cache .ruff_cache docs/_build docs/_generated
