# paperchat: `make demo` installs and opens the app; `make test` installs and runs every test.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
# Re-install whenever the project's dependencies change.
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF $(if $(filter x86_64,$(shell uname -m)),-DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON)

.PHONY: demo test install lint bench chromium clean-index

demo: install
	$(BIN)/paperchat ingest
	$(BIN)/paperchat serve --open

test: install chromium
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch first: a bare `torch` would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	# llama.cpp (the embedded model) is compiled here: for any x86-64 CPU with AVX2, not for this one. A native
	# build uses AMX/AVX-512 instructions that some virtual machines fault on (a general protection fault in
	# libggml-cpu at the first answer); never from pip's cache, where a native build may lie.
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip install --quiet --no-cache-dir 'llama-cpp-python[server]>=0.3'
	$(BIN)/python -m pip install --quiet -e '.[test,local]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# Debian's Chromium for the browser tests (Playwright never downloads a browser here). The machine's package
# lists usually still serve: `apt-get update` (which has hung here on an unreachable mirror) only when they do not.
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null 2>&1 || { timeout 600 apt-get update -qq; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }; \
	  else echo "browser tests need Debian's chromium: sudo apt-get install chromium"; fi; }

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

bench: install
	$(BIN)/python -m pip install --quiet -e '.[bench]'
	$(BIN)/python bench/run.py

clean-index:
	rm -rf .paperchat
