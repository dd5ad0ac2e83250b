# spark-lag-assign: every target sets up what it needs (.venv, Maven-fetched jars) on first use.
.DEFAULT_GOAL := help
SHELL := /bin/bash

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
MVN    ?= mvn
JVM    := .jvm
export PYSPARK_PYTHON := $(abspath $(PY))

.PHONY: help setup venv jvm demo lint test test-protocol test-mutation test-thorough test-cluster test-unit bench bench-speed bench-quick broker dist clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $@

$(JVM)/.fetched: conf/pom.xml
	@command -v $(MVN) >/dev/null || { echo "Maven (mvn) is needed to fetch the Kafka and Hadoop jars" >&2; exit 1; }
	rm -rf $(JVM)/broker $(JVM)/spark-kafka $(JVM)/hdfs $(JVM)/assignors
	$(MVN) -B -q -f conf/pom.xml -P broker dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(abspath $(JVM))/broker
	$(MVN) -B -q -f conf/pom.xml -P spark-kafka dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(abspath $(JVM))/spark-kafka
	$(MVN) -B -q -f conf/pom.xml -P hdfs dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(abspath $(JVM))/hdfs
	$(MVN) -B -q -f conf/pom.xml -P assignors dependency:copy-dependencies -DincludeScope=runtime -DoutputDirectory=$(abspath $(JVM))/assignors
	@touch $@

venv: $(VENV)/.installed ## create .venv and install the package with its dev tools
jvm: $(JVM)/.fetched ## fetch the Kafka broker, Spark's Kafka source, a test HDFS and Kafka's own assignors with Maven
setup: venv jvm ## both of the above

demo: setup ## run the planner end to end on a local broker and local Spark (out/demo)
	$(PY) jobs/demo.py --output out/demo

lint: venv ## the quality gates: ruff (the project's rules, pyproject.toml) and mypy on the package
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: setup lint ## the gates, then every test: pure, Spark, against a real local broker, the JVM; then the protocol's thorough profile
	$(PY) -m pytest
	$(MAKE) --no-print-directory test-protocol

test-protocol: venv ## the handover protocol's state machine under hypothesis' thorough profile (~100k steps)
	$(PY) -m pytest -q tests/unit/test_handover_model.py tests/unit/test_handover_scenarios.py --hypothesis-profile=unit-thorough

test-mutation: venv ## mutation score of the handover's decision code against the protocol tests of `make test` (an hour or more; out/mutation/report.md)
	$(PY) -m tests.mutation.run

test-thorough: venv ## the pure suite with every hypothesis property at 10,000 examples (bug hunting; long, not in CI)
	$(PY) -m pytest -m "not spark and not broker and not hdfs and not jvm" --hypothesis-profile=thorough

test-cluster: setup ## the proof on a Spark standalone cluster (master + 2 workers) with HDFS: kafka:// and hdfs:// stores
	$(PY) -m pytest -m cluster tests/cluster

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

dist: venv ## dist/spark_lag_assign.zip, for spark-submit --py-files on a cluster
	@mkdir -p dist
	rm -f dist/spark_lag_assign.zip
	$(PY) -c "import pathlib, zipfile; z = zipfile.ZipFile('dist/spark_lag_assign.zip', 'w', zipfile.ZIP_DEFLATED); [z.write(p) for p in sorted(pathlib.Path('spark_lag_assign').rglob('*')) if p.suffix in ('.py', '.typed') and 'testing' not in p.parts]; z.close()"
	@echo "dist/spark_lag_assign.zip: pass it with --py-files; executors need pandas and pyarrow, drivers kafka-python, pydantic and tenacity too"

clean: ## remove outputs (keeps .venv and .jvm)
	rm -rf out dist spark-warehouse metastore_db derby.log .pytest_cache artifacts
