# The two commands of the README. Both create .venv and install what is missing first.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: demo test bootstrap bench clean

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	$(PY) -m kafka_spark.demo

test: bootstrap
	$(PY) -m pytest -q $(PYTEST_ARGS)

bench: bootstrap
	$(PY) bench/broker_throughput.py

clean:
	rm -rf .venv build *.egg-info
