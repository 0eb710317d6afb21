# Every target sets itself up: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export SIAMESE_DATA ?= $(abspath ../shared/data)

.PHONY: install browser demo test bench bench-quality bench-speed clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $@

demo: install
	$(PY) examples/demo.py

test: install browser
	$(PY) -m pytest -q

# The web page is tested in Debian's headless Chromium (Playwright's own browser download is not used).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

bench-speed: install
	$(PY) bench/speed.py

bench-quality: install
	$(PY) bench/quality.py

bench: bench-speed bench-quality

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
