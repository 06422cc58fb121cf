# The two quick-start commands (README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@ $(VENV)/.installed

install: $(VENV)/.installed

demo: $(VENV)/.installed
	$(BIN)/epoch-audit demo

test: $(VENV)/.installed-test
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run_all.py

# What the demo, the accuracy run, the HTML report and a wheel build write, then caches and the venv.
DEMO_OUTPUTS = epoch-audit-demo epoch-audit-output epoch-audit-accuracy demo-output report.html \
               spark-warehouse metastore_db derby.log
clean:
	rm -rf $(DEMO_OUTPUTS) dist build *.egg-info .pytest_cache .hypothesis .ruff_cache $(VENV)
