# rxlab: `make run` sets up and simulates the built-in default scenario;
# `make test` sets up and runs the test suite. Both work on a fresh machine.
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test setup system lint bench reproduce clean-cache

# `run` installs what rxlab needs; `test` adds the test tools (pytest, pytest-xdist, hypothesis, ruff,
# SimPy, psutil, scipy: pyproject.toml [test]), so a first `make run` does not wait for them.
# -q -q: errors only. A machine's pip config may list index folders that lack a package,
# and pip warns once per package per folder ("Location ... is ignored"); the install
# still reads that config (CI installs from PyPI through it), only the warnings go.
PIP := $(VENV)/bin/pip install -q -q

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $@

$(VENV)/.installed-test: $(VENV)/.installed
	$(PIP) -e '.[test]'
	touch $@

setup: $(VENV)/.installed-test

system:
	bash scripts/setup-system.sh

run: $(VENV)/.installed
	$(VENV)/bin/rxlab run default

# The suite runs in two parts: everything but the real-kernel checks on two worker
# processes (pytest-xdist; a file's tests stay on one worker, which shares its
# module-scoped simulations) beside scripts/boundscheck.py (the loop compiled with
# bounds checks, and one signature per loop function: docs/reliability.md), then the
# `kernel` tests alone, since they time the real kernel and another process on its
# CPUs moves their figures.
BOUNDSCHECK_LOG := $(VENV)/boundscheck.log
test: setup system
	$(VENV)/bin/ruff check rxlab tests scripts benchmarks
	$(PY) scripts/boundscheck.py > $(BOUNDSCHECK_LOG) 2>&1 & bc=$$!; \
	  $(VENV)/bin/pytest -q -n 2 --dist loadfile -m "not kernel"; rc=$$?; \
	  wait $$bc; bcrc=$$?; cat $(BOUNDSCHECK_LOG); \
	  test $$rc -eq 0 -a $$bcrc -eq 0
	$(VENV)/bin/pytest -q -m kernel

lint: setup
	$(VENV)/bin/ruff check rxlab tests

bench: setup
	$(VENV)/bin/rxlab bench

reproduce: setup
	$(VENV)/bin/rxlab reproduce rss-rxhash
	$(VENV)/bin/rxlab reproduce flow-limit

clean-cache:
	rm -rf $${XDG_CACHE_HOME:-$$HOME/.cache}/rxlab/numba
