# One target per command; CI (.ci/run) calls `make test` like everyone else.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: install serve test lint eval docs fmt pytest bench docker clean

install: $(VENV)/.installed  ## the service and the development tools (tests, linters, browser driver)

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(VENV)/.served $@

# Serving needs the package and its dependencies only, not the test tools.
$(VENV)/.served: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

serve: $(VENV)/.served  ## start the service on SQLite for yourself (local mode; another port: make serve PORT=8081)
	$(BIN)/tracelore serve --local $(if $(PORT),--port $(PORT))

lint: install  ## formatting, static checks (ruff, mypy --strict) and the signature library
	$(BIN)/ruff format --check .
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/tracelore lint --fail-on-warnings

eval: install  ## the library measured on the corpus of real logs (fails below tests/corpus/thresholds.yaml)
	$(BIN)/tracelore eval tests/corpus

docs: install  ## the documentation (docs/, MkDocs) built into build/docs; a broken link or anchor fails it
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# One worker per core, each test file on one worker: a module's live server and fixtures are built once.
pytest: install
	$(BIN)/pytest -n auto --dist loadfile

test: lint eval docs pytest  ## the whole test suite

fmt: install
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

bench: install  ## throughput and memory against rg/grep/cat (see bench/README.md)
	$(BIN)/python bench/run.py

docker:
	docker build -t tracelore .

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
