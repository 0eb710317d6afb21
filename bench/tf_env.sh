#!/usr/bin/env bash
# Create the separate TensorFlow/Keras venv used by bench/keras_seed.py.
# Idempotent: does nothing if bench/.venv-tf already imports the pinned TF.
# Never installs torch here (the PyTorch package lives in its own env).
set -euo pipefail

TF_PKG="tensorflow-cpu==2.15.1"   # last Keras-2 release (the seed's API); has cp311 wheels
TF_VERSION="2.15.1"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
VENV="${TF_VENV:-$HERE/.venv-tf}"
PY="${PYTHON:-python3.11}"

if [ -x "$VENV/bin/python" ] && \
   TF_CPP_MIN_LOG_LEVEL=3 "$VENV/bin/python" -c "import tensorflow as tf, sys; sys.exit(tf.__version__ != '$TF_VERSION')" >/dev/null 2>&1; then
    [ -f "$VENV/.gitignore" ] || echo '*' > "$VENV/.gitignore"
    echo "tf venv OK: $VENV (tensorflow $TF_VERSION)" >&2
    exit 0
fi

[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# keep the venv out of git without touching the repo's .gitignore
[ -f "$VENV/.gitignore" ] || echo '*' > "$VENV/.gitignore"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# numpy<2: TF 2.15 wheels are built against NumPy 1.x
"$VENV/bin/python" -m pip install --quiet "$TF_PKG" "numpy<2"
"$VENV/bin/python" -c "import tensorflow as tf; print('tensorflow', tf.__version__)" >&2
if "$VENV/bin/python" -c "import torch" >/dev/null 2>&1; then
    echo "ERROR: torch is present in $VENV; it must not be" >&2
    exit 1
fi
echo "tf venv ready: $VENV" >&2
