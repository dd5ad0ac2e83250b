# spark-lag-assign: every target sets up what it needs (.venv, Maven-fetched jars) on first use.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MVN    ?= mvn
export MVN
# The PySpark of .venv, within pyproject.toml's range: the newest whose Kafka source Maven
# Central serves complete (3.5.7 and 4.0.0 are; 4.0.1 to 4.3.0 are not), so that `make test`
# runs the consuming side too. `make test-compat` runs the other supported lines.
PYSPARK_VERSION ?= 4.0.0
PACK   := build/pack-venv
# `make dist PYTHON_PREFIX=/usr`: the packed environment's bin/python links to /usr/bin/python3.11
# on the cluster's hosts instead of to the Python that built it (README, "On a cluster")
PYTHON_PREFIX ?=
export PYSPARK_PYTHON := $(abspath $(PY))
# Prometheus 3.16's source as the Go module proxy serves it (Prometheus 3.x is module v0.3xx)
PROMETHEUS_MODULE ?= github.com/prometheus/prometheus/cmd/prometheus@v0.316.0
PROMETHEUS := .tools/bin/prometheus

.PHONY: help setup venv jvm demo lint test test-compat test-protocol test-mutation test-thorough test-cluster test-prometheus test-unit prometheus bench bench-speed bench-quick broker dist clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed-$(PYSPARK_VERSION): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]' 'pyspark==$(PYSPARK_VERSION)'
	@rm -f $(VENV)/.installed-*
	@touch $@

venv: $(VENV)/.installed-$(PYSPARK_VERSION) ## create .venv with PySpark $(PYSPARK_VERSION) (PYSPARK_VERSION=...), the package and its dev tools
jvm: venv ## fetch the broker, Spark's Kafka source and a test HDFS for .venv's PySpark, and Kafka's own assignors, with Maven
	$(PY) -m spark_lag_assign.testing.jvmfetch
setup: venv jvm ## both of the above

demo: setup ## run the planner end to end on a local broker and local Spark (out/demo)
	$(PY) jobs/demo.py --output out/demo

lint: venv ## the quality gates: ruff (the project's rules, pyproject.toml) and mypy on the package
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: setup lint ## the gates, then every test: pure, Spark, against a real local broker, the JVM; then the protocol's thorough profile
	$(PY) -m pytest
	$(MAKE) --no-print-directory test-protocol

test-compat: venv ## the other Spark lines, each in .venv-compat/<version>: 3.5.7, 4.0.0, 4.3.0 (README, "Versions")
	$(PY) -m tests.compat

test-protocol: venv ## the handover protocol's state machine under hypothesis' thorough profile (~100k steps)
	$(PY) -m pytest -q tests/unit/test_handover_model.py tests/unit/test_handover_scenarios.py --hypothesis-profile=unit-thorough

test-mutation: venv ## mutation score of the handover's decision code and the follower's lease checks against the protocol tests of `make test` (about 25 minutes on 2 cores; out/mutation/report.md)
	$(PY) -m tests.mutation.run

test-thorough: venv ## the pure suite with every hypothesis property at 10,000 examples (bug hunting; long, not in CI)
	$(PY) -m pytest -m "not spark and not broker and not hdfs and not jvm" --hypothesis-profile=thorough

test-cluster: setup dist ## the proof on a standalone cluster (master + 2 workers whose Python has nothing installed; apps ship dist/'s packed environment) with HDFS: kafka:// and hdfs:// stores
	$(PY) -m pytest -m cluster tests/cluster

$(PROMETHEUS):
	GOBIN=$(abspath .tools/bin) go install $(PROMETHEUS_MODULE)

prometheus: $(PROMETHEUS) ## build a Prometheus server from its Go module into .tools/bin (about 20 minutes the first time on 2 cores)

test-prometheus: setup $(PROMETHEUS) ## opt-in, not in CI: a real Prometheus scrapes a live pipeline and answers every dashboard query
	PROMETHEUS_BIN=$(abspath $(PROMETHEUS)) $(PY) -m pytest -m prometheus tests/prometheus

test-unit: venv ## only the pure tests (no Spark, no broker, no JVM): a few minutes
	$(PY) -m pytest -m "not spark and not broker and not hdfs and not jvm"

bench: setup ## benchmarks: tables and plots in out/bench
	$(PY) -m tests.bench --output out/bench

bench-speed: venv ## our assignors' core and end-to-end time at a million partitions (--profile for cProfile)
	$(PY) -m tests.bench.bench_speed

bench-quick: setup ## a fast subset of the benchmarks, for development
	$(PY) -m tests.bench --quick --output out/bench-quick

broker: setup ## keep a local broker running until Ctrl-C
	$(PY) -m spark_lag_assign.testing.localkafka

dist: venv ## dist/: the wheel, and the packed environment for spark-submit --archives (venv-pack)
	rm -rf dist build
	@mkdir -p build
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir dist .
	@# the runtime dependencies without pyspark and py4j: the cluster's Spark provides its own
	$(PY) -c "import tomllib; print('\n'.join(d for d in tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies'] if not d.startswith('pyspark')))" > build/runtime.txt
	$(PY) -m pip freeze --exclude-editable > build/constraints.txt
	$(PY) -m venv $(PACK)
	$(PACK)/bin/python -m pip install --quiet -c build/constraints.txt -r build/runtime.txt
	$(PACK)/bin/python -m pip install --quiet --no-deps dist/spark_lag_assign-*.whl
	$(VENV)/bin/venv-pack --quiet --prefix $(PACK) $(if $(PYTHON_PREFIX),--python-prefix $(PYTHON_PREFIX)) --output dist/spark_lag_assign-env.tar.gz
	chmod 644 dist/spark_lag_assign-env.tar.gz
	@echo "dist/: the wheel, and spark_lag_assign-env.tar.gz for --archives (README, \"On a cluster\")"

clean: ## remove outputs (keeps .venv, .venv-compat and .jvm)
	rm -rf out dist build spark-warehouse metastore_db derby.log .pytest_cache artifacts
