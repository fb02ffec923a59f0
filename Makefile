# One task runner. `make help` lists the targets.
UV ?= uv
export UV_COMPILE_BYTECODE := 1
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
RUN := $(UV) run --frozen

.PHONY: help install test test-fast test-pg16 lint format demo bench serve clean

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

install:  ## create .venv from the lock file, every extra (uv is bootstrapped with pip when missing)
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv
	$(UV) sync --frozen --extra all --compile-bytecode

test: install  ## the whole suite on a real embedded PostgreSQL + pgvector; ends with its wall time
	$(RUN) pytest

test-fast: install  ## the quick loop: pure tests and a smoke test of each job (tests/fix_speed.py)
	$(RUN) pytest -m fast -q

test-pg16: install  ## the pg_versions tests again, on PostgreSQL 16.10 + pgvector 0.8.1
	UV=$(UV) .ci/test-pg16

lint: install  ## ruff (check and format) and mypy on the package
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy

format: install  ## apply ruff's formatting and fixes
	$(RUN) ruff format .
	$(RUN) ruff check --fix .

demo: install  ## the main job end to end on the embedded defaults (the lab, hag_lab)
	$(RUN) hag demo

bench: install  ## benchmarks: figures and ratios against a baseline measured in the same run
	$(RUN) python -m bench

serve: install  ## Prefect server + work pool + deployments + worker, in one step
	$(RUN) hag serve

clean:  ## stop every embedded database under .hag (default, demo), then remove local state
	HAG_DATA_DIR=$(CURDIR)/.hag $(RUN) hag db stop --all
	rm -rf .hag reports
