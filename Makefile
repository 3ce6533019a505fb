# Two commands set up everything on a fresh machine: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-slow test-gpu fuzz soak lint bench clean

# The bytecode is compiled at install, as a wheel install does: where PYTHONDONTWRITEBYTECODE is set,
# every process would otherwise compile dynfuse's sources again (0.15 s of each `dynfuse run`).
$(INSTALLED): setup.cfg setup.py pyproject.toml dynfuse/_recorder.c dynfuse/_launch.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	$(BIN)/python -m compileall -q dynfuse
	touch $@

demo: $(INSTALLED)
	$(BIN)/python examples/demo.py

test: $(INSTALLED) lint
	$(BIN)/python -m pytest -n auto --maxprocesses 4

test-slow: $(INSTALLED)
	$(BIN)/python -m pytest -m slow

# On a machine with a GPU and its driver: the device, kernel, exactness and reliability tests on it.
test-gpu: $(INSTALLED)
	$(BIN)/python -m pytest -m gpu

# A long fuzzing session (CI runs a bounded one in `make test`); a fresh seed each time, printed.
fuzz: $(INSTALLED)
	$(BIN)/python -m dynfuse fuzz --examples 20000 --max-depth 12 --time 1800

# Issue 8's load test: 10,000 distinct traces and 100,000 repeats in one process (minutes, not in CI).
soak: $(INSTALLED)
	$(BIN)/python perf/soak.py

bench: $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	$(BIN)/python perf/bench.py

lint: $(INSTALLED)
	$(BIN)/ruff check dynfuse tests perf examples
	$(BIN)/ruff format --check dynfuse tests perf examples

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
