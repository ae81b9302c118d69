# vLLM PR Weekly. A fresh machine needs two commands: `make run` and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
NEWSLETTER := $(BIN)/newsletter
SAMPLE_FEED := build/sample/feed.atom

.PHONY: install lock system-deps run test lint typecheck bench site serve preview approve clean
SITE_DIR := build/site
SITE_PORT ?= 8000

# The virtual environment, with the project installed editable and its test extras, every
# version pinned by requirements.lock; uv installs it (pip when uv cannot be had).
$(STAMP): pyproject.toml requirements.lock scripts/python-deps
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/python-deps install
	touch $(STAMP)

install: $(STAMP)

# requirements.lock afresh from pyproject.toml (after a dependency is added or raised there).
lock:
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/python-deps lock

# The Debian packages the tests need (Chromium, CJK fonts, Java, SpamAssassin), installed
# when missing and when the machine allows apt; otherwise it names them and stops.
system-deps:
	scripts/system-deps

STORE := data/subscribers.sqlite3

# The weekly job on the embedded default: the bundled sample feed, moved into the last
# complete week (examples/redate.py), built into build/issues/<week>/ and sent to the local
# outbox there; a fresh store is seeded with the sample subscribers first.
run: install
	$(BIN)/python examples/redate.py examples/sample-feed.atom $(SAMPLE_FEED)
	@if [ ! -f $(STORE) ]; then \
	  echo "fresh local store: seeding the sample subscribers of examples/subscribers.csv"; \
	  $(NEWSLETTER) subscribers import examples/subscribers.csv --confirmed; \
	fi
	$(NEWSLETTER) run --feed $(SAMPLE_FEED)
	@echo "web archive: $(SITE_DIR)/ — 'make site' serves it at http://127.0.0.1:$(SITE_PORT)/index.html"

# Proof the coming issue before it goes out: build it from the sample re-dated as `make run`
# does, write build/issues/<week>/preview/, serve it on 127.0.0.1 and print the approve command
# (exit 3 when the proof report has a blocking problem). A fresh store is seeded with the
# sample subscribers as `make run` does, so the interest variants their areas choose are
# proofed too. WEEK=2026-W48 previews that week from [feed] urls instead (the bundled sample,
# as dated, is 2026-W48). PREVIEW_TO=you@example.org also sends test copies
# (PREVIEW_LAYOUTS=zh-en,en: only those); PREVIEW_ARGS passes more options (--no-serve,
# --watch, --port P). CORRECT="the reason" corrects a week that already went out (its page
# then says "corrected on <day>" with the reason; docs/operations.md#corrections).
preview: install
	$(BIN)/python examples/redate.py examples/sample-feed.atom $(SAMPLE_FEED)
	@if [ ! -f $(STORE) ]; then \
	  echo "fresh local store: seeding the sample subscribers of examples/subscribers.csv"; \
	  $(NEWSLETTER) subscribers import examples/subscribers.csv --confirmed; \
	fi
	$(NEWSLETTER) preview $(if $(WEEK),--week $(WEEK),--feed $(SAMPLE_FEED)) $(if $(PREVIEW_TO),--to $(PREVIEW_TO)) $(if $(PREVIEW_LAYOUTS),--layouts $(PREVIEW_LAYOUTS)) $(if $(CORRECT),--correct "$$CORRECT") $(PREVIEW_ARGS)

# Approve the issue you proofed with `make preview`: WEEK=2026-W48 names the week (default:
# the last complete week, the one `make preview` and `make run` build).
approve: install
	$(NEWSLETTER) approve $(if $(WEEK),--week $(WEEK))

# Serve the published archive on loopback (what [site] base_url points at by default).
site: install
	@test -d $(SITE_DIR) || { echo "no archive in $(SITE_DIR) yet: run 'make run' first"; exit 2; }
	@echo "serving $(SITE_DIR)/ at http://127.0.0.1:$(SITE_PORT)/index.html (Ctrl-C stops)"
	$(BIN)/python -m http.server --bind 127.0.0.1 --directory $(SITE_DIR) $(SITE_PORT)

# The subscription app (subscribe form, confirm, unsubscribe, preferences) on 127.0.0.1 at
# the port of [site] app_url (8001). SERVE_PORT=8002 serves on another port; its pages and
# confirmation mails then link to that port (the note it prints says what else to change).
# With the default outbox its confirmation mails land in build/outbox/, each file logged.
SERVE_PORT ?=
serve: install
	$(NEWSLETTER) serve $(if $(SERVE_PORT),--port $(SERVE_PORT))

# The suite's bytecode (the project's modules, the tests with pytest's rewritten asserts, and
# every `newsletter` process a test starts) is cached under build/pycache, even where
# PYTHONDONTWRITEBYTECODE is set: without a cache each of the suite's processes compiles
# everything again (collection alone took 7 s instead of 0.7 s), and nothing is written
# into the source tree.
TEST_ENV := PYTHONDONTWRITEBYTECODE= PYTHONPYCACHEPREFIX=$(CURDIR)/build/pycache

# Every test, on every core (pytest-xdist), after the system packages the browser tests need
# (scripts/system-deps). test-fast: only the in-process layer, no Chromium, no moto, no second
# process, nothing of half a second or more (markers in pyproject.toml). --dist loadgroup keeps the
# tests of one xdist_group on one worker, so an expensive module fixture is built once. PYTEST_ARGS
# passes more options (.ci/run: --durations=25, so what the suite costs stays in sight).
test: install system-deps
	$(TEST_ENV) $(BIN)/python -m pytest -n auto --dist loadgroup $(PYTEST_ARGS)

# The fast layer spends about a quarter of its time waiting (loopback servers, timeouts that
# are what a test checks), so it runs one worker more than there are cores; the whole suite,
# Chromium-bound, is quicker with one per core.
FAST_WORKERS ?= $(shell $(PYTHON) -c 'import os; print((os.cpu_count() or 1) + 1)')

.PHONY: test-fast
test-fast: install
	$(TEST_ENV) $(BIN)/python -m pytest -n $(FAST_WORKERS) --dist loadgroup -m "not browser and not aws and not subprocess and not slow" $(PYTEST_ARGS)

# ruff (style, and complexity over 15 is an error) and the import contracts of pyproject.toml:
# the layering docs/architecture.md draws.
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-cache --no-logo

typecheck: install
	$(BIN)/mypy

# make bench: about fourteen minutes (the send path at scale, 10,000 and 100,000 subscribers with
# 1 and 2 shard workers, is half of it); make bench FULL=1: the issue's full sizes (10,000
# recipients over SMTP, lists up to 100,000, and a 1,000,000-subscriber list through the send
# path), about ninety minutes.
# Commas would split $(if ...)'s arguments: the full send sizes live in a variable.
SEND_FULL := --recipients 10000 --memory-sizes 10000,50000,100000

bench: install
	$(BIN)/python bench/bench_build.py
	$(BIN)/python bench/bench_hostile.py
	$(BIN)/python bench/bench_email_bytes.py
	$(BIN)/python bench/bench_send.py $(if $(FULL),$(SEND_FULL))
	$(BIN)/python bench/bench_site.py
	$(BIN)/python bench/bench_search.py
	$(BIN)/python bench/bench_scale.py $(if $(FULL),--full)
	$(BIN)/python bench/bench_subscribe.py
	$(BIN)/python bench/bench_import.py
	$(BIN)/python bench/bench_preview.py
	$(BIN)/python bench/bench_process.py
	$(BIN)/python bench/bench_lambda.py

clean:
	rm -rf build
