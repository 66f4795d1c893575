# The whole set-up on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = "0" ] || echo sudo)

.PHONY: install demo test worker histories bench chaos clean compose-tool

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(PY) -m ratchet.cli demo

# docker-compose.yml is validated by a real compose parser (Debian's docker-compose).
compose-tool:
	@command -v docker-compose >/dev/null 2>&1 || { \
		$(SUDO) apt-get update -qq && $(SUDO) apt-get install -y -qq docker-compose >/dev/null; }

test: install compose-tool
	$(PY) -m pytest -q --durations=10

worker: install
	$(PY) -m worker

# Re-record tests/histories/*.json (the replay corpus) after an intended workflow change.
histories: install
	$(PY) -m ratchet.record_histories

# Fault tolerance, measured (docs/RELIABILITY.md): runs under SIGKILLed workers, a dev server
# restart and a failing model endpoint, then an audit of the outside store.
chaos: install
	$(PY) -m ratchet.chaos --runs 50

clean:
	rm -rf .ratchet

# Benchmarks against the raw Temporal SDK floor; not part of `make test`. About 25 minutes;
# `make bench BENCH_ARGS=--quick` takes a few. Writes bench/results/latest.md and PNG plots.
bench: install
	@$(PY) -c "import matplotlib" 2>/dev/null || $(PY) -m pip install -q matplotlib
	@[ -x $(VENV)/bin/py-spy ] || $(PY) -m pip install -q py-spy
	$(PY) -m bench $(BENCH_ARGS)
