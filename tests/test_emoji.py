"""Emoji images, the convolutional VAE and the text→emoji model, on the shared data (small runs)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch
from PIL import Image
from test_cli import assert_user_error, run, run_json

from siamese.emoji.images import char_to_name, load_emojis, name_to_char
from siamese.emoji.sentiment import sentiment_classes, sentiment_priors
from siamese.emoji.sheets import grid_codes, pattern_code
from siamese.emoji.sqam import EmojiSQAM
from siamese.emoji.sqam_training import answer_hinge
from siamese.emoji.tweets import SENTIMENTS, read_tweets
from siamese.emoji.vae import ConvVAE, EmojiVAE, VAEConfig
from siamese.emoji.vae_training import VAETrainConfig, train_vae
from siamese.errors import DataError, ModelError


@pytest.fixture(scope="session")
def emoji_dir(data_dir):
    return data_dir / "emoji" / "twemoji_36x36"


@pytest.fixture(scope="session")
def emojis(emoji_dir):
    return load_emojis(emoji_dir)


@pytest.fixture(scope="session")
def small_vae(emojis, tmp_path_factory):
    """The seed's architecture with 8 filters, trained 2 epochs (a few seconds), saved and reloaded."""
    vae = train_vae(emojis, model_config=VAEConfig(filters=8), config=VAETrainConfig(epochs=2), progress=False)
    path = vae.save(tmp_path_factory.mktemp("vae") / "vae")
    return vae, path


# -- images -----------------------------------------------------------------------------------------


def test_loads_all_874_emojis_as_36x36x4_in_unit_range(emojis, data_dir):
    assert len(emojis) == 874
    assert emojis.images.shape == (874, 36, 36, 4) and emojis.images.dtype == np.float32
    assert emojis.images.min() == 0.0 and emojis.images.max() == 1.0
    assert emojis.images[..., 3].mean() * 255 == pytest.approx(151.5, abs=0.1)  # DATA.md: mean alpha 151.5
    assert [n + ".png" for n in emojis.names] == sorted(n + ".png" for n in emojis.names)  # file name order
    with open(data_dir / "emoji" / "manifest.csv", encoding="utf-8") as f:
        manifest = {row["codepoints"]: row["char"] for row in csv.DictReader(f)}
    assert set(manifest) == set(emojis.names)
    for name in emojis.names:  # names and characters map both ways, as in the manifest
        assert name_to_char(name).replace("\ufe0f", "") == manifest[name].replace("\ufe0f", "")
        assert char_to_name(manifest[name]) == name


def test_find_by_name_or_character(emojis):
    party = emojis.find("1f389")
    assert emojis.find("🎉") == emojis.find("1f389.png") == party
    assert emojis.chars[party] == "🎉"
    assert emojis.names[emojis.find("🇺🇸")] == "1f1fa-1f1f8"
    with pytest.raises(DataError, match="unknown emoji"):
        emojis.find("not an emoji")


def test_bad_image_folders_get_one_line_errors(tmp_path, emoji_dir):
    with pytest.raises(DataError, match="no .png emoji images"):
        load_emojis(tmp_path)
    Image.new("RGBA", (32, 32)).save(tmp_path / "1f600.png")
    with pytest.raises(DataError, match=r"1f600\.png: image is 32x32, expected 36x36"):
        load_emojis(tmp_path)
    (tmp_path / "1f600.png").write_bytes(b"not a png")
    with pytest.raises(DataError, match=r"1f600\.png: not a readable PNG"):
        load_emojis(tmp_path)
    (tmp_path / "1f600.png").unlink()
    (tmp_path / "smile.png").write_bytes((emoji_dir / "1f600.png").read_bytes())
    with pytest.raises(DataError, match=r"smile\.png: file name is not hex code points"):
        load_emojis(tmp_path)


# -- VAE ----------------------------------------------------------------------------------------------


def test_vae_codes_are_finite_for_all_874_emojis(small_vae, emojis):
    vae, path = small_vae
    codes = EmojiVAE.load(path).encode(emojis.images)
    assert codes.shape == (874, 16)
    assert np.isfinite(codes).all()  # the seed had inf codes for 4.15 % of them
    assert np.unique(codes, axis=0).shape[0] > 700  # mostly distinct, even after 2 epochs of a tiny model


def test_vae_sampling_stays_finite_when_the_log_variance_explodes(emojis):
    module = ConvVAE(VAEConfig(filters=4))
    with torch.no_grad():
        module.variational.bias[16:] = 1e6  # what made the seed's exp(log_var / 2) overflow
    logits, mean, log_var = module(torch.from_numpy(emojis.images[:8]).permute(0, 3, 1, 2))
    assert log_var.max() <= 10.0
    assert torch.isfinite(logits).all() and torch.isfinite(mean).all()


def test_vae_training_reports_both_losses_per_epoch_on_an_80_20_split(small_vae):
    vae, path = small_vae
    info = vae.info["training"]
    assert (info["train_images"], info["val_images"]) == (699, 175)
    assert [h["epoch"] for h in info["history"]] == [1, 2]
    for h in info["history"]:
        assert np.isfinite(h["loss"]) and np.isfinite(h["val_loss"]) and h["seconds"] > 0
    assert info["history"][1]["loss"] < info["history"][0]["loss"]
    assert sorted(p.name for p in path.iterdir()) == ["config.json", "model.safetensors"]
    assert json.loads((path / "config.json").read_text())["format"] == "siamese-emoji-vae/1"


def test_vae_round_trip_decodes_to_images(small_vae, emojis):
    vae, path = small_vae
    loaded = EmojiVAE.load(path)
    np.testing.assert_allclose(loaded.encode(emojis.images[:5]), vae.encode(emojis.images[:5]), atol=1e-6)
    images = loaded.decode(np.zeros((3, 16), np.float32))
    assert images.shape == (3, 36, 36, 4) and images.min() >= 0 and images.max() <= 1


def test_grid_patterns_match_the_seed():
    assert pattern_code("A", 0, 1).tolist() == [0] * 8 + [1] * 8
    assert pattern_code("B", 0, 1).tolist() == [0, 1] * 8
    assert pattern_code("C", 2, 3.5).tolist() == [2, 2, 3.5, 3.5] * 4
    grid = grid_codes("A")
    assert grid.shape == (400, 16)
    assert grid[0].tolist() == [-2.0] * 16 and grid[-1].tolist() == [2.0] * 16


# -- the text→emoji model ---------------------------------------------------------------------------


def test_hinge_over_every_wrong_answer_matches_a_hand_computed_value():
    # Answers 🎉 = (1, 0), 😈 = (0, 1), 😡 = (−1, 1); one question q = (1, 0) labelled positive and
    # one labelled neutral. cos(q, ·) = 1, 0, −0.7071.
    # positive: max(0, .2 − 1 + 0) = 0 and max(0, .2 − 1 − .7071) = 0
    # neutral:  max(0, .2 − 0 + 1) = 1.2 and max(0, .2 − 0 − .7071) = 0  → mean of 4 triplets = 0.3
    answers = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 1.0]])
    questions = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    loss = answer_hinge(questions, answers, [SENTIMENTS.index("positive"), SENTIMENTS.index("neutral")], 0.2)
    assert loss.item() == pytest.approx(0.3, abs=1e-6)


def test_reads_airline_tweets_with_three_sentiments(data_dir):
    tweets = read_tweets(data_dir / "airline_tweets" / "Tweets_12000.csv")
    assert len(tweets) == 12000
    shares = np.bincount(tweets.labels) / len(tweets)
    assert shares[SENTIMENTS.index("negative")] == pytest.approx(0.63, abs=0.01)  # the majority class


@pytest.mark.parametrize("content, message", [
    ("text,airline_sentiment\nhello,happy\n", "csv:2: column 'airline_sentiment': label 'happy'"),
    ("text,airline_sentiment\n,positive\n", "csv:2: column 'text': empty text"),
    ("tweet,airline_sentiment\nhello,positive\n", "missing column 'text'"),
])
def test_bad_tweet_files_name_line_and_column(tmp_path, content, message):
    path = tmp_path / "tweets.csv"
    path.write_text(content)
    with pytest.raises(DataError, match=message):
        read_tweets(path)


def test_emoji_sentiment_priors_know_angry_from_party(emojis):
    classes = sentiment_classes(sentiment_priors(emojis.names))
    assert SENTIMENTS[classes[emojis.find("😡")]] == "negative"
    assert SENTIMENTS[classes[emojis.find("🎉")]] == "positive"
    assert SENTIMENTS[classes[emojis.find("😭")]] == "negative"
    assert SENTIMENTS[classes[emojis.find("😍")]] == "positive"


def test_sqam_keeps_the_average_of_the_later_epochs(small_vae, emojis, monkeypatch):
    """average_from=2 of 3 epochs: the kept weights are the mean of epochs 2 and 3, not any one epoch."""
    from siamese.emoji import sqam_training

    states, validation = [], sqam_training.validation

    def record(model, val, margin):
        states.append({k: v.clone() for k, v in model.network.state_dict().items()})
        return validation(model, val, margin)

    monkeypatch.setattr(sqam_training, "validation", record)
    tweets = read_tweets()
    train, val = tweets.subset(range(600)), tweets.subset(range(600, 800))
    model = sqam_training.train_sqam(train, val, codes=small_vae[0].encode(emojis.images), names=emojis.names,
                                     config=sqam_training.SQAMTrainConfig(epochs=3, average_from=2), progress=False)
    assert model.info["training"]["averaged_epochs"] == [2, 3]
    kept = model.network.state_dict()
    for name in ("shared.0.weight", "text.embedding.weight"):
        torch.testing.assert_close(kept[name], (states[1][name] + states[2][name]) / 2)
        assert not torch.equal(kept[name], states[2][name])
    with pytest.raises(Exception, match="average_from must be at least 1"):
        sqam_training.train_sqam(train, val, codes=small_vae[0].encode(emojis.images), names=emojis.names,
                                 config=sqam_training.SQAMTrainConfig(epochs=3, average_from=0), progress=False)


# -- the command line, end to end -------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_sqam(small_vae, data_dir, emoji_dir, tmp_path_factory):
    """`siamese emoji train` on the first 4,000 tweets for 3 epochs (sentiment-aware, GloVe)."""
    out = tmp_path_factory.mktemp("sqam") / "model"
    result = run_json("emoji", "train", "--vae", small_vae[1], "--out", out, "--images", emoji_dir,
                      "--data", data_dir / "airline_tweets" / "Tweets_12000.csv",
                      "--glove", data_dir / "glove" / "glove-50d-5k.json", "--limit", 4000, "--epochs", 3, "--quiet")
    return out, result


def test_small_sqam_run_beats_the_majority_class(trained_sqam):
    out, result = trained_sqam
    test, majority = result["test"], result["baselines"]["majority"]
    assert test["n"] == 800
    assert test["accuracy"] > majority["accuracy"] + 0.03, (test["accuracy"], majority["accuracy"])
    assert np.array(test["confusion_matrix"]).sum() == 800
    assert set(test["recall"]) == set(SENTIMENTS)
    assert 0.6 < result["baselines"]["tfidf_logreg"]["accuracy"] <= 1
    assert result["glove"]["covered"] > 1000
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]


def test_sqam_round_trip_predicts_the_same(trained_sqam):
    out, _ = trained_sqam
    model = EmojiSQAM.load(out)
    texts = ["@united thanks, great crew!", "@united lost my bag again, furious"]
    again = EmojiSQAM.load(out)
    np.testing.assert_allclose(model.scores(texts), again.scores(texts), atol=1e-6)
    assert model.scores(texts).shape == (2, 874)
    assert model.answer_names == ["1f389", "1f608", "1f621"]


def test_suggest_ranks_all_emojis_and_draws_a_strip(trained_sqam, small_vae, emoji_dir, tmp_path):
    out, _ = trained_sqam
    png = tmp_path / "strip.png"
    result = run_json("emoji", "suggest", out, "@united thank you so much, best flight ever", "-k", 5,
                      "--png", png, "--images", emoji_dir)
    scores = [s["score"] for s in result["suggestions"]]
    assert len(scores) == 5 and scores == sorted(scores, reverse=True)
    assert all(name_to_char(s["name"]) == s["char"] for s in result["suggestions"])
    assert Image.open(png).size[0] > 200
    generated = run_json("emoji", "suggest", out, "hello", "-k", 874 + 3, "--generated", 3, "--vae", small_vae[1],
                         "--images", emoji_dir)
    assert sum(bool(s.get("generated")) for s in generated["suggestions"]) == 3


def test_train_vae_encode_generate_commands(tmp_path, emoji_dir):
    vae_dir = tmp_path / "vae"
    result = run_json("emoji", "train-vae", "--out", vae_dir, "--images", emoji_dir, "--filters", 4, "--epochs", 1, "--quiet")
    assert result["non_finite_codes"] == 0 and result["emojis"] == 874
    assert {"loss", "val_loss", "seconds"} <= set(result["history"][0])
    codes = tmp_path / "codes.csv"
    encoded = run_json("emoji", "encode", vae_dir, "--out", codes, "--images", emoji_dir)
    assert encoded == {"out": str(codes), "emojis": 874, "dim": 16, "non_finite_codes": 0}
    with open(codes, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 874 and rows[0]["codepoints"] == "1f004" and "z15" in rows[0]
    sheets = run_json("emoji", "generate", vae_dir, "--out", tmp_path / "sheets", "--images", emoji_dir,
                      "--samples", 16, "--between", "🎉,1f621", "--steps", 6)
    names = sorted(p.split("/")[-1] for p in sheets["files"])
    assert names == ["grid_A.png", "grid_B.png", "grid_C.png", "interpolation.png", "reconstructions.png", "samples.png"]
    assert Image.open(tmp_path / "sheets" / "grid_B.png").size == (20 * 38 + 2, 20 * 38 + 2)
    assert Image.open(tmp_path / "sheets" / "interpolation.png").size == (8 * 38 + 2, 38 + 2)


def test_bad_inputs_exit_with_one_line_and_write_nothing(tmp_path, small_vae, emoji_dir, data_dir):
    bad_images = tmp_path / "images"
    bad_images.mkdir()
    Image.new("RGBA", (40, 36)).save(bad_images / "1f600.png")
    out = tmp_path / "vae"
    assert_user_error(run("emoji", "train-vae", "--out", out, "--images", bad_images, "--quiet", check_ok=False),
                      "1f600.png", "40x36")
    assert not out.exists()

    tweets = tmp_path / "tweets.csv"
    tweets.write_text("text,airline_sentiment\n@united ok,positive\n@united meh,so-so\n")
    model = tmp_path / "model"
    assert_user_error(run("emoji", "train", "--vae", small_vae[1], "--out", model, "--data", tweets,
                          "--images", emoji_dir, "--quiet", check_ok=False), "tweets.csv:3:", "airline_sentiment", "so-so")
    assert not model.exists()

    assert_user_error(run("emoji", "suggest", tmp_path, "hello", check_ok=False), "not a siamese emoji SQAM model folder")
    sheets = tmp_path / "sheets"
    assert_user_error(run("emoji", "generate", small_vae[1], "--out", sheets, "--images", emoji_dir,
                          "--between", "1f389,nope", check_ok=False), "unknown emoji 'nope'")
    assert not sheets.exists()
    with pytest.raises(ModelError, match="not a siamese emoji VAE folder"):
        EmojiVAE.load(tmp_path)


def test_emoji_commands_import_in_either_order():
    import subprocess
    import sys

    for first in ("siamese.emoji.cli", "siamese.cli"):
        code = f"import {first}, siamese.cli; print(len(siamese.cli.emoji_app.registered_commands))"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == "5", proc.stderr
