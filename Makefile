# GNU make. `make test` builds everything it needs from a machine with only python3 and pip.
VENV ?= .venv
PY = $(VENV)/bin/python
# Touched after a successful install; pip runs again whenever pyproject.toml is newer.
STAMP = $(VENV)/.installed
PROTOS = $(wildcard proto/strom_api/v1/*.proto)

.PHONY: venv proto lint test bench run run-secure monitor clean sim chaos fuzz kafka-fuzz

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@# Spark finds pyspark_strom by scanning its workers' sys.path for pyspark_* modules; an
	@# editable install's import hook is invisible to that scan, a plain path entry is not.
	$(PY) -c "import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()['purelib'], 'strom-source-tree.pth').write_text('$(CURDIR)\\n')"
	touch $@

# Same command as tests/test_generated_code.py; -Iproto makes generated modules import each
# other as strom_api.v1.x_pb2.
proto: venv
	$(PY) -m grpc_tools.protoc -Iproto --python_out=. --pyi_out=. --grpc_python_out=. $(PROTOS)

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy storage strom_api strom raft metadata coordinator broker server pyspark_strom strom_tools
	$(VENV)/bin/lint-imports

# The whole suite on both cores, a whole file per worker (a file's module-scoped cluster is
# built once; tests/sim sums its chunks in one process). No test may depend on having the
# machine to itself: behaviour is asserted, never a duration that load can stretch (a bound,
# where one is the point, sits far from what the behaviour under test would take without
# the feature). On a 2-core machine the node suites took 23.5 minutes one test at a time
# and 13 on two workers.
test: venv lint
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=25 tests

# The seeded Raft simulation (tests/sim): `make sim` runs SEEDS seeds from START and prints a
# summary; `make sim SEED=N` replays one seed with its event trace. CI runs 1000 seeds in pytest.
SEEDS ?= 1000
START ?= 0
sim: venv
	$(PY) -m tests.sim $(if $(SEED),--seed $(SEED) --trace,--seeds $(SEEDS) --start $(START))

# `make bench` runs every script in bench/ (bench/produce_consume.py among them); `make bench
# QUICK=1` passes --quick to each.
bench: venv
	@set -e; scripts="$(wildcard bench/*.py)"; \
	if [ -z "$$scripts" ]; then echo "no benchmarks yet in bench/"; fi; \
	for f in $$scripts; do echo "== $$f"; $(PY) $$f $(if $(QUICK),--quick); done

# Fault injection (tests/chaos): `make chaos SEEDS=5 DURATION=120 [NEMESIS=kill,pause]
# [TOPOLOGY=combined|split|both] [CLIENTS=strom|confluent]` runs each seed on each topology
# and prints the checker's table; CLIENTS=confluent runs the workload through confluent-kafka
# against the Kafka protocol listeners. `make test` runs short fixed runs (tests/chaos).
DURATION ?= 60
TOPOLOGY ?= both
CLIENTS ?= strom
NEMESIS ?= kill,kill-leader,kill-controller,pause,partition-node,partition-leader,partition-controller,crash-unflushed,slow-disk,clock-jump
# SEEDS defaults to 1000 for `make sim`; chaos runs take a minute each, so 3 unless given.
CHAOS_SEEDS = $(if $(filter command line environment,$(origin SEEDS)),$(SEEDS),3)
chaos: venv
	$(PY) -m tests.chaos --seeds $(CHAOS_SEEDS) --start $(START) --duration $(DURATION) \
		--topology $(TOPOLOGY) --nemesis $(NEMESIS) --clients $(CLIENTS)

# The seeded fuzzer (tests/fuzz): `make fuzz CASES=20000 SEED=3 [SERVICE=Produce,RaftService]
# [SECURED=1]` sends CASES random and mutated requests to every RPC of a 3-node cluster
# (SECURED=1: a SASL_SSL one, as a SCRAM user and without a session, SaslAuthenticate too) and
# prints each finding with the seed and case that shows it (`python -m tests.fuzz --seed S
# --case N [--secured]` replays one). `make test` runs one fixed seed of each
# (tests/fuzz/test_fuzz.py, tests/fuzz/test_fuzz_secured.py).
CASES ?= 5000
fuzz: venv
	$(PY) -m tests.fuzz --seed $(if $(SEED),$(SEED),0) --cases $(CASES) \
		$(if $(SERVICE),--service $(SERVICE)) $(if $(SECURED),--secured)

# The Kafka wire-protocol fuzzer (tests/kafka_fuzz): `make kafka-fuzz CASES=3000 SEED=3
# [API=Produce,Fetch]` sends CASES well-formed, mutated, malformed and pipelined frames of
# every API and version the KAFKA listener serves to a 3-node cluster and prints each finding
# with the command that replays its case (`python -m tests.kafka_fuzz --seed S --case N`).
# `make test` runs one fixed seed (tests/kafka_fuzz/test_kafka_fuzz.py).
kafka-fuzz: venv
	$(PY) -m tests.kafka_fuzz --seed $(if $(SEED),$(SEED),0) --cases $(CASES) \
		$(if $(API),--api $(API))

run: venv
	$(PY) deploy/local/cluster.py

# `make run-secure`: the same cluster secured (deploy/local/secure.py): SASL_SSL clients
# (SCRAM-SHA-512), mTLS between nodes, the authorizer on; a CA, node certificates and an
# admin user made on first use in .local-cluster-secure; it prints the admin's client
# properties file for the tools' --command-config.
run-secure: venv
	$(PY) deploy/local/cluster.py --secure

# `make monitor` (beside `make run`): Debian's Prometheus (apt-get install prometheus; not its
# service) scraping the local cluster with deploy/prometheus/prometheus.yml and the alert
# rules; UI on http://127.0.0.1:9090, data in .local-cluster/prometheus.
monitor:
	@command -v prometheus >/dev/null || { echo "prometheus is not installed: apt-get install --no-install-recommends prometheus"; exit 1; }
	prometheus --config.file=deploy/prometheus/prometheus.yml \
		--storage.tsdb.path=.local-cluster/prometheus --web.listen-address=127.0.0.1:9090

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
