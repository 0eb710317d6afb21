"""A cross-encoder with a prior bi-encoder (siamese.cross, ``CrossConfig(prior=...)``): untrained it
scores exactly as the calibrated bi-encoder; trained, it corrects it; the bi-encoder travels in the
folder; the CLI and ModelConfig take it; on real pairs and MiniLM's weights."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import invoke
from sklearn.metrics import roc_auc_score

from siamese import ConfigError, ModelConfig, ModelError, TrainConfig, datasets, train
from siamese.cross import CrossConfig, CrossEncoder, train_cross
from siamese.cross.train import fit_prior
from siamese.models.loading import load_model
from siamese.models.sentence_encoder import sentence_encoder


@pytest.fixture(scope="module")
def small(data_dir):
    # MSRP: pairs where a bi-encoder's cosine means what it says (on PAWS it is reversed: the
    # non-paraphrases there are the same words reordered)
    pairs = datasets.load("msrp-train", data_dir)
    rows = np.random.default_rng(1).permutation(len(pairs))
    return pairs.subset(rows[:64]), pairs.subset(rows[64:128])


@pytest.fixture(scope="module")
def prior_model(small, tmp_path_factory):
    train_pairs, val = small
    model = train_cross(
        train_pairs,
        val,
        model_config=CrossConfig(max_length=64, prior="minilm"),
        config=TrainConfig(epochs=1, batch_size=16, lr=5e-5, precision="fp32"),
        progress=False,
    )
    return model, model.save(tmp_path_factory.mktemp("cross-prior") / "model")


def test_untrained_it_is_the_bi_encoders_logistic_fit(data_dir):
    quora = datasets.load("quora-sample", data_dir)
    model = CrossEncoder.build(CrossConfig(max_length=64, prior="minilm"))
    minilm, _ = sentence_encoder("minilm")  # an independent build of the same bi-encoder
    cosines = minilm.similarity_pairwise(quora.text1, quora.text2)
    fit_prior(model.network, cosines, quora.labels)
    scale, shift = float(model.network.prior_scale), float(model.network.prior_shift)
    assert scale > 1  # duplicates have the higher cosines
    # The logistic fit is the one scikit-learn finds (no penalty).
    from sklearn.linear_model import LogisticRegression

    ref = LogisticRegression(C=np.inf).fit(cosines[:, None], quora.labels)
    assert scale == pytest.approx(ref.coef_[0, 0], rel=1e-3) and shift == pytest.approx(
        ref.intercept_[0], rel=1e-3, abs=1e-3
    )
    s = model.similarity_pairwise(quora.text1, quora.text2)
    np.testing.assert_allclose(s, 1 / (1 + np.exp(-(scale * cosines + shift))), atol=1e-5)
    assert roc_auc_score(quora.labels, s) == pytest.approx(roc_auc_score(quora.labels, cosines), abs=1e-9)


def test_trained_it_corrects_the_prior_and_the_folder_carries_it(prior_model, small):
    model, path = prior_model
    _, val = small
    assert model.network.head.weight.abs().sum() > 0  # started at zero: the correction was learned
    info = model.info["prior"]
    assert info["source"] == "minilm" and info["fitted_on"] == val.source
    assert info["scale"] == float(model.network.prior_scale) > 0
    cosines = model.prior_cosines(val.text1, val.text2)
    head_only = model.similarity_pairwise(val.text1, val.text2)
    prior_only = 1 / (1 + np.exp(-(info["scale"] * cosines + info["shift"])))
    assert np.abs(head_only - prior_only).max() > 1e-3  # the transformer's reading moved the scores
    np.testing.assert_allclose(model.similarity_pairwise(val.text2, val.text1), head_only, atol=1e-6)  # symmetric
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors", "prior", "tokenizer.json"]
    loaded = load_model(path)
    assert isinstance(loaded, CrossEncoder) and loaded.prior is not None
    np.testing.assert_allclose(loaded.similarity_pairwise(val.text1, val.text2), head_only, atol=1e-5)
    assert loaded.fingerprint() == model.fingerprint()
    # The prior/ folder is a sentence-transformers folder too: the same cosines from the peer library.
    from sentence_transformers import SentenceTransformer

    st = SentenceTransformer(str(path / "prior"), device="cpu")
    a, b = st.encode(val.text1[:8], normalize_embeddings=True), st.encode(val.text2[:8], normalize_embeddings=True)
    np.testing.assert_allclose((a * b).sum(1), cosines[:8], atol=1e-4)


def test_a_folder_missing_its_prior_is_refused_in_one_line(prior_model, tmp_path):
    import shutil

    _, path = prior_model
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    shutil.rmtree(broken / "prior")
    with pytest.raises(ModelError, match="missing prior/config.json"):
        CrossEncoder.load(broken)
    proc = invoke("predict", broken, "How do I learn Python?", "How do I learn Java?")
    assert proc.returncode == 2 and proc.stderr.strip().count("\n") == 0 and "prior/config.json" in proc.stderr


def test_a_cross_encoder_cannot_be_a_prior(prior_model):
    _, path = prior_model
    with pytest.raises(ModelError, match="a cross-encoder cannot be the prior"):
        CrossEncoder.build(CrossConfig(max_length=64, prior=str(path)))


def test_cli_and_model_config_take_a_prior(data_dir, tmp_path):
    small_file = tmp_path / "pairs.csv"
    small_file.write_text(
        "question1,question2,is_duplicate\n"
        + "".join(
            f'"how do i cook rice {i}","what is the way to cook rice {i}",1\n'
            f'"how do i cook rice {i}","where is paris {i}",0\n'
            for i in range(12)
        )
    )
    proc = invoke(
        "train",
        "--cross",
        "--prior",
        "minilm",
        "--data",
        small_file,
        "--out",
        tmp_path / "cli",
        "--epochs",
        1,
        "--batch-size",
        8,
        "--quiet",
        "--json",
    )
    assert proc.returncode == 0, proc.stderr
    model = load_model(tmp_path / "cli")
    assert model.prior is not None and model.config.prior == "minilm"
    proc = invoke("train", "--prior", "minilm", "--data", small_file, "--out", tmp_path / "x")
    assert (
        proc.returncode == 2 and "--prior" in proc.stderr and "--cross" in proc.stderr and not (tmp_path / "x").exists()
    )
    # The Python API: ModelConfig(cross=True, encoder_options={"prior": ...}) through train().
    pairs = datasets.load("paws-qqp-train", data_dir).subset(range(32))
    api = train(
        pairs,
        None,
        model_config=ModelConfig(encoder="transformer", cross=True, max_length=48, encoder_options={"prior": "minilm"}),
        config=TrainConfig(epochs=1, batch_size=16, precision="fp32"),
        progress=False,
    )
    assert isinstance(api, CrossEncoder) and api.info["prior"]["fitted_on"] == pairs.source
    with pytest.raises(ConfigError, match="prior"):  # only a cross-encoder has a prior
        ModelConfig(encoder="transformer", encoder_options={"prior": "minilm"}).check()
    with pytest.raises(ConfigError, match="must name a bi-encoder"):
        ModelConfig(encoder="transformer", cross=True, encoder_options={"prior": 3}).check()
