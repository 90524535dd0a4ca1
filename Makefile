# The two commands of the README. Both create .venv and install what is missing first.
PY := .venv/bin/python
PYTEST_ARGS ?=

.PHONY: demo test bootstrap bench clean lint-imports

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	$(PY) -m kafka_spark.demo

test: bootstrap
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The layering contracts of setup.cfg ([importlinter]); tests/test_layout_imports.py runs them in `make test`.
lint-imports: bootstrap
	.venv/bin/lint-imports --no-cache

bench: bootstrap
	$(PY) bench/broker_throughput.py

clean:
	rm -rf .venv build *.egg-info
