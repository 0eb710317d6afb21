"""The model card: README.md in every saved model folder (data, recipe, threshold and how it was
chosen, metrics, calibration, intended use) and history.png for a trained model; kept up to date
when the threshold or calibration is refitted, and never over a README.md of the user's."""

from __future__ import annotations

import shutil

import pytest

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.models.card import MARKER


@pytest.fixture(scope="module")
def trained_two_epochs(data_dir, tmp_path_factory):
    train_pairs = datasets.load("msrp-train", data_dir).positives().subset(range(600))
    val_pairs = datasets.load("msrp-val", data_dir)
    model = train(
        train_pairs,
        val_pairs,
        model_config=ModelConfig(dim=32, seed=0),
        config=TrainConfig(epochs=2, batch_size=64, seed=0),
        progress=False,
    )
    return model, model.save(tmp_path_factory.mktemp("card") / "model")


def test_a_trained_model_folder_carries_its_card_and_history(trained_two_epochs):
    model, folder = trained_two_epochs
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert text.startswith(MARKER)
    for section in ("## Intended use", "## Data and recipe", "## Threshold", "## Metrics", "## Calibration"):
        assert section in text
    assert f"**{model.threshold:.4f}**" in text and "to maximise accuracy" in text and "500 pairs" in text
    assert "Trained on 600 pairs (msrp-train);" in text and "learns from the duplicate pairs" in text
    assert "Validated on 500 pairs (msrp-val)" in text
    # the summary names the loss these weights were trained with and the vocabulary learned from the texts
    assert f"| loss | {model.info['training']['loss']} |" in text and "| tokenizer | words, learned from" in text
    history = model.info["training"]["history"]
    assert len(history) == 2 and "| 2 |" in text and f"{history[1]['loss']:.4f}" in text
    assert f"{model.calibrator.method} on 500 pairs" in text
    assert "![loss, validation loss and metric per epoch](history.png)" in text
    assert (folder / "history.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert SiameseModel.load(folder).threshold == model.threshold  # the folder still loads as it did


def test_refitting_rewrites_the_card_but_not_a_users_readme(trained_two_epochs, tmp_path):
    _, folder = trained_two_epochs
    copy = shutil.copytree(folder, tmp_path / "model")
    model = SiameseModel.load(copy)
    model.set_threshold(0.4321)
    model.calibrator = None
    model.save_fitted()
    text = (copy / "README.md").read_text(encoding="utf-8")
    assert "**0.4321**" in text and "Not calibrated: `probability` is None" in text
    (copy / "README.md").write_text("my own notes\n", encoding="utf-8")
    model.set_threshold(0.5)
    model.save_fitted()
    assert (copy / "README.md").read_text(encoding="utf-8") == "my own notes\n"


@pytest.mark.slow  # loads MiniLM
def test_a_pretrained_model_card_says_where_it_came_from(tmp_path):
    from siamese.models.sentence_encoder import from_pretrained

    folder = from_pretrained("minilm").save(tmp_path / "minilm")
    text = (folder / "README.md").read_text(encoding="utf-8")
    assert "Pretrained encoder used as it is" in text and "the default, not chosen on validation pairs" in text
    assert "| loss | none (pretrained, used as it is) |" in text  # not the from-scratch config's default
    assert "| tokenizer | the pretrained model's WordPiece (tokenizer.json) |" in text
    assert not (folder / "history.png").exists() and "No training history" in text


def test_the_card_says_how_a_platt_cut_was_chosen():
    from types import SimpleNamespace

    from siamese.models.card import _threshold

    choice = {"metric": "accuracy", "value": 0.876, "chosen_on": ["held-out cosines of the labels"], "val_pairs": 534}
    platt = SimpleNamespace(threshold=0.6607, info={"learned": {"threshold_choice": {**choice, "rule": "platt"}}})
    text = _threshold(platt)
    assert text.startswith("**0.6607**: chosen on held-out cosines of the labels (534 pairs) where a logistic (Platt)")
    assert "crosses 1/2, where its accuracy is 0.876." in text and "maximise" not in text
    best = SimpleNamespace(threshold=0.6607, info={"learned": {"threshold_choice": {**choice, "rule": "best cut"}}})
    assert _threshold(best).endswith("(534 pairs) to maximise accuracy, where its accuracy is 0.876.")
