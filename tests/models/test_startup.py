"""Start-up: loading a model folder imports no scikit-learn (calibration fitting does, when asked), and
a transformer rebuilt without its random initialisation gives exactly the saved model's vectors."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from siamese import SiameseModel


@pytest.fixture(scope="module")
def minilm_folder(tmp_path_factory):
    from siamese.models.sentence_encoder import from_pretrained

    model = from_pretrained("minilm")
    return model, model.save(tmp_path_factory.mktemp("minilm") / "model")


@pytest.mark.slow  # loads MiniLM
def test_loaded_transformer_gives_the_saved_vectors(minilm_folder):
    model, folder = minilm_folder
    texts = ["When will I see you?", "When can I see you again?", "Do they like hiking in the desert?"]
    loaded = SiameseModel.load(folder, precision="fp32", device="cpu")
    assert np.array_equal(loaded.encode(texts, precision="fp32"), model.encode(texts, precision="fp32"))
    assert loaded.fingerprint() == model.fingerprint()


@pytest.mark.slow  # a subprocess that loads MiniLM
def test_loading_and_predicting_import_no_sklearn_or_matplotlib(minilm_folder):
    _, folder = minilm_folder
    code = (
        "import sys; from siamese.models.loading import load_model; "
        f"m = load_model({str(folder)!r}); m.similarity_pairwise(['a'], ['b']); "
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'sklearn', 'matplotlib'}))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


def test_loading_a_word_model_imports_no_dynamo_or_transformers(tmp_path):
    # the shape check builds the encoder on the meta device: no random fill there (torch._dynamo, 1-2 s)
    from siamese import ModelConfig

    model = SiameseModel.build(["how do i learn python", "what is a premium"] * 5, ModelConfig(encoder="bow"))
    folder = model.save(tmp_path / "bow")
    code = (
        "import sys; from siamese.models.loading import load_model; "
        f"m = load_model({str(folder)!r}); print(float(m.similarity_pairwise(['learn python'], ['a premium'])[0])); "
        "print(sorted({n.split('.')[0] for n in sys.modules} & {'transformers', 'sklearn'}), "
        "'torch._dynamo' in sys.modules)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    similarity, modules = proc.stdout.strip().splitlines()
    assert modules == "[] False"
    assert float(similarity) == pytest.approx(
        float(model.similarity_pairwise(["learn python"], ["a premium"])[0]), abs=1e-6
    )
