# The two quick-start commands (README): `make demo` and `make test`. Both create .venv on first use.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin

.PHONY: demo test test-min lint bench install clean

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

# The declared floors (.ci/min-versions.txt) in their own venv: the codec, the CLI's error paths and the Spark jobs
# end to end (CI runs it after `make test`; ~6 min).
MIN_VENV = .venv-min
$(MIN_VENV)/.installed: pyproject.toml .ci/min-versions.txt
	$(PYTHON) -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MIN_VENV)/bin/python -m pip install --quiet -c .ci/min-versions.txt -e '.[test]'
	touch $@

test-min: $(MIN_VENV)/.installed
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not spark and not slow"
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider -m "not slow" tests/test_cli_run_status.py \
	    tests/test_reports_e2e.py tests/test_kraft_e2e.py tests/test_ingest_spark.py tests/test_notebook.py

bench: $(VENV)/.installed-test
	$(BIN)/python bench/run_all.py

# What the demo, the accuracy run, the HTML report and a wheel build write, then caches and the venv.
DEMO_OUTPUTS = epoch-audit-demo epoch-audit-output epoch-audit-accuracy demo-output report.html \
               spark-warehouse metastore_db derby.log
clean:
	rm -rf $(DEMO_OUTPUTS) dist build *.egg-info .pytest_cache .hypothesis .ruff_cache $(VENV) $(MIN_VENV)
