# fairgpu: the two commands are `make run` (the main job on the embedded cluster) and `make test`.
# Each sets up what it needs: a Python virtualenv (.venv), the collection link (.collections) and the
# cluster toolchain (built from Go modules into ~/.cache/fairgpu, once).

SHELL := /bin/bash
VENV ?= .venv
BIN := $(VENV)/bin
PYTHON ?= python3
# The fairgpu path: kueue or mig (passed to the playbooks as -e path=...).
FAIRGPU_PATH ?= kueue
INVENTORY ?= inventories/local/hosts.yml
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help setup toolchain toolchain-prometheus-operator toolchain-perses toolchain-prometheus-web dashboard-page run site validate teardown test loadgen-torch unit lint sanity rules integration integration-shared integration-own test-fleet test-multikueue test-replay replay replay-compare replay-sweep replay-advise molecule molecule-mig bench bench-scale bench-scale-baseline noisy-neighbour clean

help:
	@echo "make run        bring up the embedded cluster, deploy path $(FAIRGPU_PATH), validate, write results/"
	@echo "make test       unit tests, lint, integration tests on embedded clusters, molecule's default scenario: two lanes at once (logs in results/tests/)"
	@echo "make molecule-mig molecule test -s mig (path mig on a cluster of its own, about 6 min)"
	@echo "make teardown   remove the embedded cluster and Kueue (the binary cache stays)"
	@echo "make test-fleet roll out, drift-check, validate and break a fleet of three embedded clusters (about 7 min)"
	@echo "make test-multikueue MultiKueue on three embedded clusters: dispatch, status, a flood, a lost worker (docs/multikueue.md)"
	@echo "make bench      benchmark site.yml against kubectl apply (figures for docs/measurements.md)"
	@echo "make bench-scale 1,000 simulated GPU nodes, 20 tenants, 10,000 Workloads through Kueue (SCALE_NODES, SCALE_TENANTS, SCALE_WORKLOADS, SCALE_PODS; docs/measurements.md: Scale)"
	@echo "make bench-scale-baseline Kueue's own scheduler performance baseline shape (v0.19.2 configs/baseline) beside upstream's bounds"
	@echo "make replay     replay four busy days of the Alibaba GPU trace through Kueue on a cluster of its own (docs/replay.md: Replaying a real trace)"
	@echo "make test-replay the replay of make test alone (tests/integration/test_98_replay.py, about 7 min)"
	@echo "make replay-compare the same short replay under each Kueue policy, COMPARE_RUNS (3) times each, one comparison report (about 2.3 h)"
	@echo "make replay-sweep   the same short replay under fair sharing at SWEEP_LOADS (0.5 1.0 1.3) x the GPUs, SWEEP_RUNS (3) times each, beside the model and the trace's own waits"
	@echo "make replay-advise  search quotas meeting wait targets with a model, then prove them by a replay"
	@echo "make noisy-neighbour a tenant's load alone and beside another's on this host's GPUs (NOISY_SECONDS, NOISY_REPEATS; docs/validation.md)"

$(VENV)/.installed: requirements.txt requirements-test.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r requirements-test.txt
	touch $@

.collections/ansible_collections/fairgpu/tenancy:
	mkdir -p .collections/ansible_collections/fairgpu
	ln -sfn ../../.. $@

setup: $(VENV)/.installed .collections/ansible_collections/fairgpu/tenancy

toolchain:
	bash files/lab/toolchain/toolchain.sh ensure >/dev/null

# PyTorch for the load generator's torch path on the CPU (files/gpu_load.py, tests/unit/test_gpu_load.py): PyPI's
# torch, pinned in versions.env, in a virtualenv of its own cached beside the toolchain (about 5 GB and 2.5 min,
# once). PyPI's Linux torch is the CUDA build (it brings NVIDIA's CUDA wheels) and runs on a CPU without a GPU; the
# CPU-only build is on PyTorch's own index, not PyPI, which nothing here reaches.
# One checkout installs at a time (a lock file beside it); .complete is written last, and the tests use the
# interpreter only where it is there, so a failed install is made again from scratch by the next make.
TORCH_VERSION := $(shell sed -n 's/^TORCH_VERSION=//p' files/lab/toolchain/versions.env)
TORCH_CACHE := $(or $(FAIRGPU_CACHE),$(HOME)/.cache/fairgpu)
TORCH_VENV := $(TORCH_CACHE)/torch-$(TORCH_VERSION)
loadgen-torch: $(TORCH_VENV)/.complete
$(TORCH_VENV)/.complete:
	mkdir -p $(TORCH_CACHE)
	flock $(TORCH_CACHE)/.torch.lock bash -c 'set -e; [ -f $@ ] && exit 0; rm -rf $(TORCH_VENV); \
	  $(PYTHON) -m venv $(TORCH_VENV); $(TORCH_VENV)/bin/pip install --quiet torch==$(TORCH_VERSION); \
	  date -u +%FT%TZ > $@'

# The Prometheus Operator and its CRDs, which only tests/integration/test_77_prometheus_operator.py needs (built once,
# cached like the rest; docs/lab.md "Toolchain").
toolchain-prometheus-operator:
	bash files/lab/toolchain/toolchain.sh ensure prometheus-operator >/dev/null

# percli (Perses's command line, from its Go module) for the lint of the Perses dashboard file (tests/unit/test_dashboard.py).
toolchain-perses:
	bash files/lab/toolchain/toolchain.sh ensure perses >/dev/null

# Prometheus with its web UI (pnpm builds the UI from the module's web/ui): make run's monitoring builds it too.
toolchain-prometheus-web:
	bash files/lab/toolchain/toolchain.sh ensure prometheus-web >/dev/null

# The dashboard page (files/lab/dashboard_page, npm), cached beside the toolchain: make run's monitoring builds it
# too; make test builds it first so that its clusters do not queue for it.
dashboard-page:
	bash files/lab/dashboard_page/build.sh >/dev/null

run: setup toolchain site validate

site: setup
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/site.yml -e path=$(FAIRGPU_PATH)

# validate.yml follows the path the last site.yml recorded on the cluster.
validate: setup
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/validate.yml

teardown: setup
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/teardown.yml

# make test runs two lanes at once (tests/lanes.py; docs/testing.md "Two lanes at once"): lint and promtool, the shared
# cluster's integration tests, then molecule's default scenario; beside them the unit tests, then the integration
# files that bring an embedded cluster of their own (marked own_cluster). Each lane stops at its first failure, the
# other goes on. The targets are split so that the two lanes take about as long (docs/testing.md "How long it takes").
TEST_LANES := "lint rules integration-shared molecule" "unit integration-own"
# PyTorch (a download) is installed while the toolchain builds (compiling), each once.
test: setup
	$(MAKE) --no-print-directory -j3 toolchain toolchain-prometheus-operator toolchain-perses toolchain-prometheus-web dashboard-page loadgen-torch
	$(BIN)/python tests/lanes.py $(TEST_LANES)

# The torch path's test runs with the interpreter of loadgen-torch where its install is complete; without it (make
# unit alone, before any make test) it is skipped, saying so, and under make test it fails.
unit: setup
	FAIRGPU_TORCH_PYTHON=$(if $(wildcard $(TORCH_VENV)/.complete),$(TORCH_VENV)/bin/python) $(BIN)/python -m pytest -q tests/unit

lint: setup
	$(BIN)/ansible-lint --offline
	$(BIN)/antsibull-changelog lint
	VENV=$(VENV) bash tests/sanity/run.sh

# ansible-test sanity, offline, on a copy of the collection (tests/sanity/run.sh says how; docs/testing.md "Sanity and module docs").
sanity: setup
	VENV=$(VENV) bash tests/sanity/run.sh

# The alert rules: promtool (built by the toolchain) checks the rule file and runs its tests; then the rule file with
# FairgpuGpuPodOutsideTenants' for: below one scrape interval, whose test shows that for: firing falsely.
rules: setup
	set -o pipefail; promtool=$$(bash files/lab/toolchain/toolchain.sh ensure prometheus | $(BIN)/python -c 'import json, sys; print(json.load(sys.stdin)["binaries"]["promtool"])'); \
	  $$promtool check rules files/monitoring/fairgpu-alerts.rules.yml && $$promtool test rules tests/rules/fairgpu-alerts.test.yml && \
	  short=$$(mktemp -d) && trap 'rm -rf "$$short"' EXIT && cp tests/rules/fairgpu-alerts-short-for.test.yml "$$short/" && \
	  PYTHONPATH=.collections $(BIN)/python -c 'import sys; from ansible_collections.fairgpu.tenancy.plugins.module_utils.monitoring.objects import rules_with_for; sys.stdout.write(rules_with_for(sys.stdin.read(), {"FairgpuGpuPodOutsideTenants": "15s"}))' \
	    < files/monitoring/fairgpu-alerts.rules.yml > "$$short/fairgpu-alerts.rules.yml" && \
	  $$promtool test rules "$$short/fairgpu-alerts-short-for.test.yml"

# The fleet's runs (tests/integration/test_97_fleet.py, about 7 minutes) are `make test-fleet`, not part of `make test`.
# --durations: the slowest tests with their times, so a CI log shows where its minutes went (docs/testing.md "How long it takes").
# -v: a line per test as it ends, so a lane's log shows progress. No cache provider: the two lanes' pytest processes
# would write one .pytest_cache at once.
# integration runs both halves at once, as make test does; integration-shared and integration-own run one each.
INTEGRATION := $(BIN)/python -m pytest -v -p no:cacheprovider --durations=25 tests/integration \
  --ignore=tests/integration/test_97_fleet.py
integration: setup toolchain toolchain-prometheus-operator
	$(BIN)/python tests/lanes.py integration-shared integration-own

integration-shared: setup toolchain
	$(INTEGRATION) -m "not own_cluster"

integration-own: setup toolchain toolchain-prometheus-operator
	$(INTEGRATION) -m own_cluster

test-fleet: setup toolchain
	$(BIN)/python -m pytest -q tests/integration/test_97_fleet.py

# MultiKueue on three embedded clusters alone (tests/integration/test_99_multikueue.py, inventories/multikueue-embedded;
# make test runs it in its second lane).
test-multikueue: setup toolchain
	$(BIN)/python -m pytest -v -p no:cacheprovider tests/integration/test_99_multikueue.py

# The replay of make test alone (tests/integration/test_98_replay.py, its own cluster fairgpu-replay).
test-replay: setup toolchain
	$(BIN)/python -m pytest -q tests/integration/test_98_replay.py

# A busy window of the Alibaba GPU trace v2023 (FAIRGPU_TRACE_DIR) replayed through Kueue on an embedded cluster
# of its own (fairgpu-replay, inventories/replay/); the report lands in results/replay/replay/.
REPLAY_VARS := -e @inventories/replay/replay.yml
replay: setup toolchain
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/site.yml $(REPLAY_VARS)
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/replay.yml $(REPLAY_VARS); rc=$$?; \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/teardown.yml $(REPLAY_VARS); exit $$rc

# The same short replay under each policy (inventories/replay-compare/policies/), COMPARE_RUNS times each, every run
# on a fresh embedded cluster fairgpu-policy (site.yml, replay.yml, teardown.yml; results/replay-compare/<policy>/
# run-<n>/), then one comparison report in results/replay-compare/ with each figure's min/median/max over the runs.
# A policy whose replay checks fail still has its report; the comparison shows the checks.
COMPARE_VARS := -e @inventories/replay-compare/compare.yml
COMPARE_POLICIES ?= strict borrowing fair shared admission
COMPARE_RUNS ?= 3
replay-compare: setup toolchain
	for policy in $(COMPARE_POLICIES); do for run in $$(seq 1 $(COMPARE_RUNS)); do \
	  vars="$(COMPARE_VARS) -e @inventories/replay-compare/policies/$$policy.yml"; \
	  dir="$(CURDIR)/results/replay-compare/$$policy/run-$$run"; \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/site.yml $$vars && \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/replay.yml $$vars -e replay_results_dir=$$dir; \
	  echo "$$policy run $$run rc=$$?"; \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/teardown.yml $$vars; \
	done; done
	$(BIN)/ansible-playbook playbooks/replay_compare.yml \
	  -e '{"replay_compare_policies": "$(COMPARE_POLICIES)", "replay_compare_runs": $(COMPARE_RUNS)}'

# One policy (fair.yml) at several loads (multiples of the cluster's GPUs asked of the same window), SWEEP_RUNS times
# each on a fresh cluster fairgpu-sweep (results/replay-sweep/load-<load>/run-<n>/), then one report with the model's
# prediction and the trace's own waits beside (docs/replay.md "A load sweep").
SWEEP_VARS := -e @inventories/replay-compare/compare.yml -e @inventories/replay-compare/policies/fair.yml \
  -e @inventories/replay-compare/sweep.yml
SWEEP_LOADS ?= 0.5 1.0 1.3
SWEEP_RUNS ?= 3
replay-sweep: setup toolchain
	for load in $(SWEEP_LOADS); do for run in $$(seq 1 $(SWEEP_RUNS)); do \
	  dir="$(CURDIR)/results/replay-sweep/load-$$load/run-$$run"; \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/site.yml $(SWEEP_VARS) && \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/replay.yml $(SWEEP_VARS) -e replay_load_factor=$$load \
	    -e replay_results_dir=$$dir; \
	  echo "load $$load run $$run rc=$$?"; \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/teardown.yml $(SWEEP_VARS); \
	done; done
	$(BIN)/ansible-playbook playbooks/replay_sweep.yml \
	  -e '{"replay_sweep_loads": "$(SWEEP_LOADS)", "replay_sweep_runs": $(SWEEP_RUNS)}'

# The quota advisor: a model of Kueue's admission searches guarantees, borrowing limits and weights that meet the
# wait targets (inventories/replay-compare/advise.yml) with the smallest sum of guarantees, then the
# recommendation is replayed through the real Kueue on fairgpu-policy; results/replay-advise/ compares both.
ADVISE_VARS := -e @inventories/replay-compare/compare.yml -e @inventories/replay-compare/advise.yml
replay-advise: setup toolchain
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/replay_advise.yml $(ADVISE_VARS) -e replay_advise_stage=model
	$(BIN)/ansible-playbook -i $(INVENTORY) playbooks/site.yml $(ADVISE_VARS) -e @results/replay-advise/recommended.yml && \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/replay.yml $(ADVISE_VARS) -e @results/replay-advise/recommended.yml; \
	  rc=$$?; $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/teardown.yml $(ADVISE_VARS); \
	  $(BIN)/ansible-playbook -i $(INVENTORY) playbooks/replay_advise.yml $(ADVISE_VARS) -e replay_advise_stage=check; exit $$rc

# make test runs the default scenario; the mig scenario's playbooks and checks (site.yml and validate.yml on path
# mig, a second run changing nothing) run in make test on the integration cluster (test_80_mig.py), so its own
# cluster (about 6 min) is make molecule-mig (docs/testing.md "Molecule").
# The default scenario verifies with the validation scenarios tests/integration does not run (baseline and
# flood_reverse: FAIRGPU_MOLECULE_SCENARIOS, extensions/molecule/default/vars.yml); molecule test alone runs all four.
molecule: setup toolchain
	FAIRGPU_MOLECULE_SCENARIOS=baseline,flood_reverse $(BIN)/molecule test -s default

molecule-mig: setup toolchain
	$(BIN)/molecule test -s mig

bench: setup toolchain
	mkdir -p results
	set -o pipefail; $(BIN)/python tests/bench/bench.py | tee results/bench.md

# The scale benchmark (not a test, not in make test): its own cluster fairgpu-scale, removed at the end; the figures
# land in results/bench-scale/. Smaller runs: SCALE_NODES=50 SCALE_TENANTS=4 SCALE_WORKLOADS=500 SCALE_PODS=100.
# Then, on the same cluster name and ports after it, Kueue's own scheduler performance baseline shape beside
# upstream's bounds: bench-scale-baseline (tests/bench/scale_baseline.py; alone, about 14 min).
bench-scale: setup toolchain
	mkdir -p results/bench-scale
	$(BIN)/python tests/bench/scale.py; rc=$$?; $(MAKE) --no-print-directory bench-scale-baseline || rc=1; exit $$rc

bench-scale-baseline: setup toolchain
	mkdir -p results/bench-scale
	$(BIN)/python tests/bench/scale_baseline.py

# The noisy-neighbour measurement on a bare host (not a test; docs/validation.md "The noisy neighbour"): the load
# generator as processes, alone and beside a neighbour on the GPUs nvidia-smi lists (on the CPU without one);
# results/noisy-neighbour/noisy.md.
NOISY_SECONDS ?= 30
NOISY_REPEATS ?= 3
NOISY_DEVICE ?= auto
# An interpreter with PyTorch and CUDA runs the loads on GPUs (the virtualenv has no torch).
NOISY_PYTHON ?= $(BIN)/python
noisy-neighbour: setup
	$(BIN)/python tests/bench/noisy_neighbour.py --seconds $(NOISY_SECONDS) --repeats $(NOISY_REPEATS) \
	  --device $(NOISY_DEVICE) --python $(NOISY_PYTHON)

clean:
	rm -rf $(VENV) .collections results
