# Two entry points for newcomers: `make demo` and `make test`. Both install what they need, and
# say what they are doing while they do it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench

$(BIN)/python:
	@echo "==> creating a virtual environment in $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> upgrading pip in $(VENV)"
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "==> installing agent-reach and every extra (LangChain, LangGraph, MCP, gateway, test tools)"
	@echo "    into $(VENV): a minute or two the first time; pip lists each package as it goes"
	$(BIN)/python -m pip install -e '.[dev]'
	touch $@
	@echo "==> installed"

install: $(VENV)/.installed

demo: install
	@echo "==> running the gateway demo: reach serve examples/config, called over MCP and HTTP"
	$(BIN)/python -m examples.gateway_demo

lint: install
	@echo "==> ruff: lint and format check"
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@echo "==> mypy --strict (about a minute on a fresh cache)"
	$(BIN)/mypy

test: lint
	@echo "==> pytest: the whole suite (a few minutes; real agents, real MCP servers)"
	$(BIN)/pytest

bench: install
	@echo "==> benchmarks: every script under benchmarks/"
	$(BIN)/python -m benchmarks.run_all
