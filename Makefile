# The two commands of the README. Both create .venv and install what is missing first.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: demo test lint bootstrap bench clean

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	$(PY) -m kafka_spark.demo

test: bootstrap
	$(PY) -m pytest -q $(PYTEST_ARGS)

# ruff (rules and formatting) over every Python file of the repository and mypy over the package;
# the settings are in pyproject.toml. CI runs it before the tests (.ci/run).
lint: bootstrap
	.venv/bin/ruff check .
	.venv/bin/ruff format --check .
	.venv/bin/mypy

bench: bootstrap
	$(PY) bench/broker_throughput.py

clean:
	rm -rf .venv build *.egg-info .mypy_cache .ruff_cache
