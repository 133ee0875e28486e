# The first use of any target creates .venv and installs the project into it.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
STUDY  ?= mnist_cnn
ARGS   ?=

.PHONY: ablation test test-all bench gpu ui list clean

# `make gpu` runs where the project is not pip-installed too (a lent GPU machine: docs/gpu.md).
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,python3)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(STAMP)

ablation: $(STAMP)  ## make ablation STUDY=mnist_cnn [ARGS="--search optuna --trials 20"]
	$(BIN)/ablate run $(STUDY) $(ARGS)

test: $(STAMP)  ## the linter, the type check, then the fast tier: every test not marked slow (pyproject.toml)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q -m "not slow" $(ARGS)

test-all: $(STAMP)  ## the linter, the type check, then the whole suite, slow tier included (what CI runs)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/python -m pytest -q $(ARGS)

bench: $(STAMP)  ## rewrites this device's section of benchmarks/RESULTS.md (2 CPU cores: the grid alone 57-71 min; ARGS=--no-grid 45 min where bf16 is emulated) [ARGS="--no-grid"]
	$(BIN)/python -m benchmarks $(ARGS)

gpu:  ## on a CUDA machine: the next steps of the GPU ledger (benchmarks/gpu/ledger.yaml) that fit one 540-s command [ARGS="--dry-run" prints a 15-minute lease's plan, "--steps a,b" runs those]; summary and tarball in $$OUT or results/gpu; exit 2 at once without a GPU
	$(GPU_PYTHON) -m benchmarks.gpu next $(ARGS)

ui: $(STAMP)  ## MLflow UI on http://127.0.0.1:5000 [ARGS="--results DIR --port N"]
	$(BIN)/ablate ui $(ARGS)

list: $(STAMP)
	$(BIN)/ablate list

clean:
	rm -rf $(VENV) results *.egg-info
