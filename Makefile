# Two entry points for newcomers: `make demo` and `make test`. Both install what they need, and
# say what they are doing while they do it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install demo test lint bench redis-server

$(BIN)/python:
	@echo "==> creating a virtual environment in $(VENV) with $(PYTHON)"
	$(PYTHON) -m venv $(VENV)
	@echo "==> upgrading pip in $(VENV)"
	$(BIN)/python -m pip install --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	@echo "==> installing agent-reach and every extra (LangChain, LangGraph, MCP, A2A, cluster, gateway, test tools)"
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

# The cluster tests start their own throwaway redis-server (tests/redis_server.py); this only makes
# sure one is installed: at once when it is, with apt-get once when it is not and we are root.
redis-server:
	@if command -v redis-server >/dev/null 2>&1; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
		echo "==> installing redis-server with apt-get (the cluster tests start a throwaway one)"; \
		apt-get install -y redis-server || { apt-get update && apt-get install -y redis-server; } \
			|| echo "==> could not install redis-server, so the cluster tests will skip"; \
	else \
		echo "==> redis-server is missing, so the cluster tests will skip: install it with 'sudo apt-get install -y redis-server' (or 'brew install redis')"; \
	fi

test: lint redis-server
	@echo "==> pytest: the whole suite on two workers (a few minutes; real agents, real MCP servers, a throwaway Redis)"
	$(BIN)/pytest -n 2 --dist loadfile

bench: install
	@echo "==> benchmarks: every script under benchmarks/"
	$(BIN)/python -m benchmarks.run_all
