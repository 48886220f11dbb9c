# The two commands of the README:
#   make reproduce   set up .venv and run the whole papermill pipeline (notebooks 00-12) offline
#   make test        set up .venv (and Chromium for the report test), check this machine (indicipr doctor) and run the test suite
# and, while editing: make test-fast (sync check, lint, and pytest without the tests marked slow; no nbdev_test)
PY ?= $(shell command -v python3.11 || command -v python3)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
ARGS ?=

.PHONY: doctor llama-wheel recipe-choice setup reproduce test test-fast test-deps sync-check lint nbtest pytest pytest-fast rehearse clean-runs docs

# llama-cpp-python: the version pinned in constraints.txt, built with these CMake flags on every x86-64 machine
LLAMA_VERSION := 0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
LLAMA_TAG := $(shell printf '%s' '$(LLAMA_VERSION) $(LLAMA_CMAKE_ARGS)' | sha256sum | cut -c1-12)
LLAMA_WHEELS ?= $(HOME)/.cache/indicipr/wheels/llama-cpp-python-$(LLAMA_TAG)

$(STAMP): settings.ini setup.py constraints.txt
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	# torch first, on its own: here `torch==2.13.0` is a CPU wheel on disk (44 s); elsewhere pip
	# takes the default build for your platform
	$(BIN)/python -m pip install -q torch==2.13.0
	# llama.cpp compiled for one fixed x86-64 instruction set, never -march=native (see "Same numbers on every machine" in notebooks/running.md):
	# the wheel is built once into a cache outside the checkout, keyed by its version and flags, and installed from there
	$(MAKE) --no-print-directory llama-wheel
	$(BIN)/python -m pip install -q --no-deps $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	# everything else from settings.ini at the exact versions of constraints.txt, with the optional extras: lm-eval (tests/systems/test_lm_eval_task.py runs the lm-evaluation-harness tasks) and
	# openvino (the CPU inference engine, tested in tests/systems/test_encoders.py)
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[dev,lm-eval,openvino]"
	$(BIN)/python -c "from indicipr.run.runner import ensure_kernel; ensure_kernel()"
	# JupyterLab started from this venv opens the notebooks unmodified and saves them as nbdev_clean leaves them
	# (indicipr.run.jupyter.ContentsManager and nbdev's pre-save hook; see notebooks/12f_run.jupyter.ipynb)
	mkdir -p $(VENV)/etc/jupyter
	cp jupyter-config/jupyter_server_config.json $(VENV)/etc/jupyter/jupyter_server_config.json
	touch $(STAMP)

setup: $(STAMP)

# build the llama-cpp-python wheel (about 9 minutes on 2 cores) unless the cache already holds it; pip's own wheel cache
# is bypassed because it keys a wheel by the source archive, not by the flags it was built with
llama-wheel:
	@if ls $(LLAMA_WHEELS)/llama_cpp_python-$(LLAMA_VERSION)-*.whl >/dev/null 2>&1; then \
	  echo "llama-cpp-python $(LLAMA_VERSION): cached wheel in $(LLAMA_WHEELS)"; \
	else \
	  echo "llama-cpp-python $(LLAMA_VERSION): building for AVX2/FMA/F16C/BMI2 (fixed, not this CPU's own) into $(LLAMA_WHEELS)"; \
	  mkdir -p $(LLAMA_WHEELS).tmp && \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" FORCE_CMAKE=1 $(BIN)/python -m pip wheel -q --no-deps --no-cache-dir \
	    --no-binary llama-cpp-python -w $(LLAMA_WHEELS).tmp llama-cpp-python==$(LLAMA_VERSION) && \
	  rm -rf $(LLAMA_WHEELS) && mv $(LLAMA_WHEELS).tmp $(LLAMA_WHEELS); \
	fi

reproduce: setup
	$(BIN)/indicipr reproduce $(ARGS)

# Debian's chromium renders the HTML report in tests/data/test_core.py (skipped outside CI when absent)
test-deps:
	@command -v chromium >/dev/null 2>&1 || { command -v apt-get >/dev/null 2>&1 && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) || \
	  echo "note: could not install chromium; the report screenshot test will be skipped outside CI"; }

sync-check: setup
	PATH=$(abspath $(BIN)):$$PATH .ci/check_sync.sh

# the one-minute canary: does this machine reproduce the committed numbers (figures/numerics_canary.json)?
doctor: setup
	$(BIN)/indicipr doctor

nbtest: setup
	$(BIN)/nbdev_test --path notebooks --n_workers 1

# ruff (settings.ini's dev requirements; configured in pyproject.toml): the linter reads the notebooks and indicipr/,
# the formatter checks the notebooks, tests and benchmarks (indicipr/ is written by nbdev_export)
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check notebooks tests benchmarks

pytest: setup
	$(BIN)/python -m pytest tests

# the tests marked slow (notebook runs, a browser, llama.cpp and lm-eval, training, the GPU script's smoke run, the docs
# build) left out: under 5 minutes on 2 cores
pytest-fast: setup
	$(BIN)/python -m pytest tests -m "not slow"

test: setup test-deps sync-check lint doctor nbtest pytest

test-fast: setup sync-check lint pytest-fast

# the paper profile's dress rehearsal: the 13 notebooks at the card's scale against stand-ins on 127.0.0.1
# (a hub mirror, an OpenAI-compatible server, random-init checkpoints under the real hub ids); see tests/rehearse.py
REHEARSE_ARGS ?= --in-place
rehearse: setup
	$(BIN)/python tests/rehearse.py $(REHEARSE_ARGS) $(ARGS)
	$(BIN)/python tests/rehearse_rebuild.py --fault-rate 0.01

# the offline recipe, chosen by group k-fold cross-validation over the training and validation sections
# (benchmarks/recipe_choice.py, the candidates of notebooks/07f_systems.recipe_choice.ipynb): it first says what the runs not yet finished
# cost (runs, tokens, minutes at a measured rate) and trains them only when that is confirmed: `make recipe-choice
# ARGS=--yes` (or INDICIPR_YES=1). Each finished run is kept in data/models/recipe_choice/cv/ and reused, so a killed
# comparison resumes; the table and figure go to $(RECIPE_RUN)/figures/, and over the committed ones in figures/ only with
# ARGS="--yes --record" (this job's own outputs, which notebook 08 checks the offline profile against). Not the main job, not CI.
RECIPE_RUN ?= runs/recipe-choice
recipe-choice: setup
	$(BIN)/python benchmarks/recipe_choice.py --run-dir $(RECIPE_RUN) $(ARGS)

# nbdev's documentation site, rendered by Quarto into _docs/ (each page shows the notebook's committed outputs): what
# nbdev_docs does, except that it does not rewrite README.md from notebooks/index.ipynb (the README is written by hand)
docs: setup
	@if command -v quarto >/dev/null 2>&1; then \
	  $(BIN)/nbdev_proc_nbs && (cd _proc && quarto render --no-cache) && rm -rf _docs && mv _proc/_docs _docs; \
	else echo "make docs: Quarto is not installed here, so the site is not built (install it from https://quarto.org, then run make docs again)."; fi

clean-runs:
	rm -rf runs
