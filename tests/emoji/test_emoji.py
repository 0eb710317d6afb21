"""Emoji images, the convolutional VAE and the text→emoji model, on the shared data (small runs)."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
import torch
from conftest import assert_user_error, run, run_json
from PIL import Image

from siamese.emoji.images import char_to_name, load_emojis, name_to_char
from siamese.emoji.sentiment import sentiment_classes, sentiment_priors
from siamese.emoji.sheets import grid_codes, pattern_code
from siamese.emoji.text_model import TextEmojiModel
from siamese.emoji.text_model_train import answer_hinge
from siamese.emoji.tweets import SENTIMENTS, read_tweets
from siamese.emoji.vae import ConvVAE, EmojiVAE, VAEConfig
from siamese.emoji.vae_train import VAETrainConfig, train_vae
from siamese.errors import DataError, ModelError


@pytest.fixture(scope="session")
def emoji_dir(data_dir):
    return data_dir / "emoji" / "twemoji_36x36"


@pytest.fixture(scope="session")
def emojis(emoji_dir):
    return load_emojis(emoji_dir)


@pytest.fixture(scope="session")
def small_vae(emojis, tmp_path_factory):
    """The VAE with 8 filters, trained 2 epochs (a few seconds), saved and reloaded."""
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
    assert np.isfinite(codes).all()  # an unbounded log-variance gave inf codes for ~4 % of them
    assert np.unique(codes, axis=0).shape[0] > 700  # mostly distinct, even after 2 epochs of a tiny model


def test_vae_sampling_stays_finite_when_the_log_variance_explodes(emojis):
    module = ConvVAE(VAEConfig(filters=4))
    with torch.no_grad():
        module.variational.bias[16:] = 1e6  # what makes an unbounded exp(log_var / 2) overflow
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


@pytest.mark.parametrize(
    "content, message",
    [
        ("text,airline_sentiment\nhello,happy\n", "csv:2: column 'airline_sentiment': label 'happy'"),
        ("text,airline_sentiment\n,positive\n", "csv:2: column 'text': empty text"),
        ("tweet,airline_sentiment\nhello,positive\n", "missing column 'text'"),
    ],
)
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


def test_text_emoji_keeps_the_average_of_the_later_epochs(small_vae, emojis, monkeypatch):
    """average_from=2 of 3 epochs: the kept weights are the mean of epochs 2 and 3, not any one epoch."""
    from siamese.emoji import text_model_train

    states, validation = [], text_model_train.validation

    def record(model, val, margin, inputs=None):
        states.append({k: v.clone() for k, v in model.network.state_dict().items()})
        return validation(model, val, margin, inputs)

    monkeypatch.setattr(text_model_train, "validation", record)
    tweets = read_tweets()
    train, val = tweets.subset(range(600)), tweets.subset(range(600, 800))
    model = text_model_train.train_text_emoji(
        train,
        val,
        codes=small_vae[0].encode(emojis.images),
        names=emojis.names,
        config=text_model_train.TextEmojiTrainConfig(epochs=3, average_from=2),
        progress=False,
    )
    assert model.info["training"]["averaged_epochs"] == [2, 3]
    kept = model.network.state_dict()
    for name in ("shared.0.weight", "text.embedding.weight"):
        torch.testing.assert_close(kept[name], (states[1][name] + states[2][name]) / 2)
        assert not torch.equal(kept[name], states[2][name])
    with pytest.raises(Exception, match="average_from must be at least 1"):
        text_model_train.train_text_emoji(
            train,
            val,
            codes=small_vae[0].encode(emojis.images),
            names=emojis.names,
            config=text_model_train.TextEmojiTrainConfig(epochs=3, average_from=0),
            progress=False,
        )


# -- the command line, end to end -------------------------------------------------------------------


@pytest.fixture(scope="module")
def trained_text_emoji(small_vae, data_dir, emoji_dir, tmp_path_factory):
    """`siamese emoji train --text-encoder bilstm` on the first 4,000 tweets for 3 epochs (sentiment-aware, GloVe)."""
    out = tmp_path_factory.mktemp("sqam") / "model"
    result = run_json(
        "emoji",
        "train",
        "--vae",
        small_vae[1],
        "--out",
        out,
        "--images",
        emoji_dir,
        "--data",
        data_dir / "airline_tweets" / "Tweets_12000.csv",
        "--glove",
        data_dir / "glove" / "glove-50d-5k.json",
        "--limit",
        4000,
        "--epochs",
        3,
        "--text-encoder",
        "bilstm",
        "--quiet",
    )
    return out, result


def test_small_sqam_run_beats_the_majority_class(trained_text_emoji):
    out, result = trained_text_emoji
    test, majority = result["test"], result["baselines"]["majority"]
    assert test["n"] == 800
    assert test["accuracy"] > majority["accuracy"] + 0.03, (test["accuracy"], majority["accuracy"])
    assert np.array(test["confusion_matrix"]).sum() == 800
    assert set(test["recall"]) == set(SENTIMENTS)
    assert 0.6 < result["baselines"]["tfidf_logreg"]["accuracy"] <= 1
    assert result["glove"]["covered"] > 1000
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors", "tokenizer.json"]
    # trained by the one Trainer (siamese/training/loop.py): its per-epoch record, the epoch kept the best on validation
    history = result["history"]
    assert all({"tweets", "tweets_per_second", "val_loss", "val_accuracy"} <= set(h) for h in history)
    assert result["val_accuracy"] == max(h["val_accuracy"] for h in history) or result.get("averaged_epochs")


def test_text_emoji_round_trip_predicts_the_same(trained_text_emoji):
    out, _ = trained_text_emoji
    model = TextEmojiModel.load(out)
    texts = ["@united thanks, great crew!", "@united lost my bag again, furious"]
    again = TextEmojiModel.load(out)
    np.testing.assert_allclose(model.scores(texts), again.scores(texts), atol=1e-6)
    assert model.scores(texts).shape == (2, 874)
    assert model.answer_names == ["1f389", "1f608", "1f621"]


def test_suggest_ranks_all_emojis_and_draws_a_strip(trained_text_emoji, small_vae, emoji_dir, tmp_path):
    out, _ = trained_text_emoji
    png = tmp_path / "strip.png"
    result = run_json(
        "emoji",
        "suggest",
        out,
        "@united thank you so much, best flight ever",
        "-k",
        5,
        "--png",
        png,
        "--images",
        emoji_dir,
    )
    scores = [s["score"] for s in result["suggestions"]]
    assert len(scores) == 5 and scores == sorted(scores, reverse=True)
    assert all(name_to_char(s["name"]) == s["char"] for s in result["suggestions"])
    assert Image.open(png).size[0] > 200
    generated = run_json(
        "emoji", "suggest", out, "hello", "-k", 874 + 3, "--generated", 3, "--vae", small_vae[1], "--images", emoji_dir
    )
    assert sum(bool(s.get("generated")) for s in generated["suggestions"]) == 3


def test_train_vae_encode_generate_commands(tmp_path, emoji_dir):
    vae_dir = tmp_path / "vae"
    result = run_json(
        "emoji", "train-vae", "--out", vae_dir, "--images", emoji_dir, "--filters", 4, "--epochs", 1, "--quiet"
    )
    assert result["non_finite_codes"] == 0 and result["emojis"] == 874
    assert {"loss", "val_loss", "seconds"} <= set(result["history"][0])
    codes = tmp_path / "codes.csv"
    encoded = run_json("emoji", "encode", vae_dir, "--out", codes, "--images", emoji_dir)
    assert encoded == {"out": str(codes), "emojis": 874, "dim": 16, "non_finite_codes": 0}
    with open(codes, encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 874 and rows[0]["codepoints"] == "1f004" and "z15" in rows[0]
    sheets = run_json(
        "emoji",
        "generate",
        vae_dir,
        "--out",
        tmp_path / "sheets",
        "--images",
        emoji_dir,
        "--samples",
        16,
        "--between",
        "🎉,1f621",
        "--steps",
        6,
    )
    names = sorted(p.split("/")[-1] for p in sheets["files"])
    assert names == [
        "grid_A.png",
        "grid_B.png",
        "grid_C.png",
        "interpolation.png",
        "reconstructions.png",
        "samples.png",
    ]
    assert Image.open(tmp_path / "sheets" / "grid_B.png").size == (20 * 38 + 2, 20 * 38 + 2)
    assert Image.open(tmp_path / "sheets" / "interpolation.png").size == (8 * 38 + 2, 38 + 2)
    again = ("emoji", "generate", vae_dir, "--out", tmp_path / "sheets", "--samples", 4, "--patterns", "A")
    before = (tmp_path / "sheets" / "samples.png").read_bytes()
    assert_user_error(run(*again, "--reconstructions", 0, check_ok=False), "samples.png", "--overwrite")
    assert (tmp_path / "sheets" / "samples.png").read_bytes() == before  # nothing of the user's replaced unasked
    rewritten = run_json(*again, "--reconstructions", 0, "--overwrite")
    assert len(rewritten["files"]) == 2 and (tmp_path / "sheets" / "samples.png").read_bytes() != before
    from siamese.emoji.files import generate_files  # what the command runs, from Python: the same sheets

    report = generate_files(vae_dir, tmp_path / "py", samples=4, patterns="A", reconstructions=0)
    assert [p.split("/")[-1] for p in report.result["files"]] == ["samples.png", "grid_A.png"]
    for name in ("samples.png", "grid_A.png"):
        assert (tmp_path / "py" / name).read_bytes() == (tmp_path / "sheets" / name).read_bytes()


def test_bad_inputs_exit_with_one_line_and_write_nothing(tmp_path, small_vae, emoji_dir, data_dir):
    bad_images = tmp_path / "images"
    bad_images.mkdir()
    Image.new("RGBA", (40, 36)).save(bad_images / "1f600.png")
    out = tmp_path / "vae"
    assert_user_error(
        run("emoji", "train-vae", "--out", out, "--images", bad_images, "--quiet", check_ok=False), "1f600.png", "40x36"
    )
    assert not out.exists()

    tweets = tmp_path / "tweets.csv"
    tweets.write_text("text,airline_sentiment\n@united ok,positive\n@united meh,so-so\n")
    model = tmp_path / "model"
    assert_user_error(
        run(
            "emoji",
            "train",
            "--vae",
            small_vae[1],
            "--out",
            model,
            "--data",
            tweets,
            "--images",
            emoji_dir,
            "--quiet",
            check_ok=False,
        ),
        "tweets.csv:3:",
        "airline_sentiment",
        "so-so",
    )
    assert not model.exists()

    assert_user_error(
        run("emoji", "suggest", tmp_path, "hello", check_ok=False), "not a siamese emoji text model folder"
    )
    sheets = tmp_path / "sheets"
    assert_user_error(
        run(
            "emoji",
            "generate",
            small_vae[1],
            "--out",
            sheets,
            "--images",
            emoji_dir,
            "--between",
            "1f389,nope",
            check_ok=False,
        ),
        "unknown emoji 'nope'",
    )
    assert not sheets.exists()
    with pytest.raises(ModelError, match="not a siamese emoji VAE folder"):
        EmojiVAE.load(tmp_path)


def test_emoji_commands_import_in_either_order():
    import subprocess
    import sys

    for first in ("siamese.cli.emoji", "siamese.cli"):
        code = f"import {first}, siamese.cli; print(len(siamese.cli.emoji_app.registered_commands))"
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and proc.stdout.strip() == "6", proc.stderr


# -- sentence encoders as the text side, readable scores, evaluate ----------------------------------


def test_temperature_fit_recovers_the_temperature_that_drew_the_labels():
    from siamese.emoji.temperature import fit_temperature, log_loss, probabilities

    rng = np.random.default_rng(0)
    cosines = rng.uniform(-1, 1, size=(4000, 3))
    labels = np.array([rng.choice(3, p=p) for p in probabilities(cosines, 0.2)])
    fitted = fit_temperature(cosines, labels)
    assert fitted["temperature"] == pytest.approx(0.2, rel=0.1)
    grid = np.linspace(0.05, 1.0, 96)  # no temperature on a grid does better than the fitted one
    assert fitted["log_loss"] <= min(log_loss(cosines, labels, t) for t in grid) + 1e-6
    assert fitted["ece"] < 0.05
    np.testing.assert_allclose(probabilities(cosines, 0.2).sum(axis=1), 1.0)


def test_suggestion_temperature_maximises_the_mass_on_the_right_emojis():
    from siamese.emoji.temperature import fit_set_temperature, probabilities, set_log_loss

    rng = np.random.default_rng(0)
    members = rng.random((500, 874)) < 0.15  # a sentiment's emojis among all
    cosines = 0.9 + 0.03 * members + rng.normal(0, 0.02, size=members.shape)  # close together, members a bit higher
    fitted = fit_set_temperature(cosines, members)
    grid = np.geomspace(0.002, 1.0, 200)
    assert fitted["log_loss"] <= min(set_log_loss(cosines, members, t) for t in grid) + 1e-6
    mass = (probabilities(cosines, fitted["temperature"]) * members).sum(axis=1).mean()
    assert fitted["mean_mass"] == pytest.approx(mass) and mass > 0.6  # far above the members' share, 0.15
    assert fitted["temperature"] < 0.05


def test_emoji_labels_are_unicode_names():
    from siamese.emoji.images import emoji_label

    assert emoji_label("1f389") == "party popper"
    assert emoji_label("1f621") == "pouting face"
    assert emoji_label("1f1fa-1f1f8") == "flag US"
    assert emoji_label("31-20e3") == "digit one"
    assert emoji_label("10fffd") == "10fffd"  # no name (private use): the code points


def test_bad_text_encoder_is_a_one_line_error(tmp_path, small_vae, emoji_dir):
    out = tmp_path / "model"
    for spec, fragment in (("nope", "no such folder nope"), (f"student:{tmp_path}", "not a Siamese model folder")):
        assert_user_error(
            run(
                "emoji",
                "train",
                "--vae",
                small_vae[1],
                "--out",
                out,
                "--images",
                emoji_dir,
                "--limit",
                60,
                "--text-encoder",
                spec,
                "--quiet",
                check_ok=False,
            ),
            fragment,
        )
        assert not out.exists()
    assert_user_error(
        run(
            "emoji",
            "train",
            "--vae",
            small_vae[1],
            "--out",
            out,
            "--images",
            emoji_dir,
            "--limit",
            60,
            "--text-encoder",
            "bilstm",
            "--fine-tune",
            "--quiet",
            check_ok=False,
        ),
        "--fine-tune is for sentence encoders",
    )


@pytest.fixture(scope="module")
def small_tweets(data_dir, tmp_path_factory):
    """The first 2,000 shared tweets in a file of their own (a test may change it and put it back)."""
    path = tmp_path_factory.mktemp("tweets") / "tweets.csv"
    with open(data_dir / "airline_tweets" / "Tweets_12000.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[:2000]
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["text", "airline_sentiment"], extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows)
    return path


@pytest.fixture(scope="module")
def minilm_text_emoji(small_vae, small_tweets, emoji_dir, tmp_path_factory):
    """`siamese emoji train --text-encoder minilm` (frozen) on 2,000 tweets, 8 epochs (seconds: the
    vectors are computed once)."""
    out = tmp_path_factory.mktemp("sqam-minilm") / "model"
    result = run_json(
        "emoji",
        "train",
        "--vae",
        small_vae[1],
        "--out",
        out,
        "--images",
        emoji_dir,
        "--data",
        small_tweets,
        "--text-encoder",
        "minilm",
        "--epochs",
        8,
        "--seed",
        1,
        "--quiet",
    )
    return out, result


def test_frozen_minilm_model_trains_and_is_saved_by_name(minilm_text_emoji, small_tweets):
    out, result = minilm_text_emoji
    assert result["text_encoder"] == {
        "spec": "minilm",
        "saved_as": "minilm",
        "dim": 384,
        "fine_tuned": False,
        "encode_seconds": result["text_encoder"]["encode_seconds"],
    }
    assert result["test"]["n"] == 400 and result["train_tweets"] == 2000 - 400 - 160
    assert result["test"]["accuracy"] > result["baselines"]["majority"]["accuracy"] + 0.05
    calibration = result["calibration"]
    assert 0.01 < calibration["temperature"] < 1 and calibration["n"] == 160
    # over all 874 emojis the softmax needs a sharper temperature than over the three answers
    assert (
        calibration["suggestions"]["temperature"] < calibration["temperature"]
        and calibration["suggestions"]["n"] == 160
    )
    # Referenced by name: no encoder weights, no tokenizer in the folder.
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "model.safetensors"]
    config = json.loads((out / "config.json").read_text(encoding="utf-8"))
    assert config["text_encoder"] == "minilm" and config["info"]["data"]["path"] == str(small_tweets.resolve())
    texts = ["@united thanks, great crew!", "@united lost my bag again, furious"]
    model = TextEmojiModel.load(out)
    np.testing.assert_allclose(model.scores(texts), TextEmojiModel.load(out).scores(texts), atol=1e-5)


def test_suggest_json_keeps_emoji_characters_and_probabilities_separate(minilm_text_emoji, emoji_dir, tmp_path):
    import unicodedata

    out, _ = minilm_text_emoji
    png = tmp_path / "strip.png"
    proc = run(
        "emoji",
        "suggest",
        out,
        "@united thank you so much, best flight ever 🎉",
        "-k",
        874,
        "--json",
        "--png",
        png,
        "--images",
        emoji_dir,
    )
    assert "\\u" not in proc.stdout and "🎉" in proc.stdout  # characters, not \ud83c escapes
    result = json.loads(proc.stdout)
    suggestions = result["suggestions"]
    assert result["text"].endswith("🎉") and all(s["char"] in proc.stdout for s in suggestions[:5])
    assert set(result["sentiment"]) == set(SENTIMENTS) and sum(result["sentiment"].values()) == pytest.approx(1.0)
    assert max(result["sentiment"], key=result["sentiment"].get) == "positive"
    probabilities = np.array([s["probability"] for s in suggestions])
    assert probabilities.sum() == pytest.approx(1.0, abs=1e-4)  # a softmax over all 874 emojis
    assert (np.diff(probabilities) <= 0).all()
    # The top choices stand out: 2.6x the median emoji with this small model (8 epochs on 1,440 tweets;
    # the full model: ~110x); trained 3 epochs and read at the answer temperature they were 1.1x.
    assert probabilities[:5].mean() > 2 * np.median(probabilities)
    for s in suggestions[:20]:
        assert s["label"] == " ".join(
            unicodedata.name(c).lower() for c in s["char"] if c not in "\u200d\ufe0f\u20e3"
        ) or s["label"].startswith("flag ")
    assert Image.open(png).size[0] > 200
    text = run("emoji", "suggest", out, "@united thank you", "-k", 3).stdout.splitlines()
    assert (
        len(text) == 4
        and text[0].startswith("sentiment: positive")
        and all("%" in line and "cos" in line for line in text[1:])
    )


def test_evaluate_matches_an_independent_computation(minilm_text_emoji, small_tweets):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import confusion_matrix
    from sklearn.pipeline import make_pipeline

    from siamese.emoji.sentiment import sentiment_classes, sentiment_priors
    from siamese.emoji.tweets import split_tweets

    out, trained = minilm_text_emoji
    result = run_json("emoji", "evaluate", out)  # default: the model's own file → its test split
    assert result["scored"].startswith("the model's held-out test split")
    model = TextEmojiModel.load(out)
    test, _, train = split_tweets(read_tweets(small_tweets), [0.2, 0.08], seed=1)
    scores = model.scores(test.texts)
    predicted = scores[:, [model.names.index(n) for n in ("1f389", "1f608", "1f621")]].argmax(axis=1)
    matrix = confusion_matrix(test.labels, predicted, labels=[0, 1, 2])
    assert result["confusion_matrix"] == matrix.tolist() == trained["test"]["confusion_matrix"]
    assert result["n"] == 400 and result["accuracy"] == pytest.approx(np.trace(matrix) / 400, abs=1e-9)
    from sklearn.metrics import recall_score

    recall = recall_score(test.labels, predicted, labels=[0, 1, 2], average=None)
    for i, sentiment in enumerate(SENTIMENTS):
        assert result["recall"][sentiment] == pytest.approx(recall[i]) == pytest.approx(matrix[i, i] / matrix[i].sum())
    printed = run("emoji", "evaluate", out).stdout
    assert ", ".join(f"{s} {recall[i]:.3f}" for i, s in enumerate(SENTIMENTS)) in printed
    assert f"TF-IDF + logistic regression {result['baselines']['tfidf_logreg']['accuracy']:.4f}" in printed
    baseline = make_pipeline(
        TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True),
        LogisticRegression(C=10.0, max_iter=2000, random_state=1),
    ).fit(train.texts, train.labels)
    assert result["baselines"]["tfidf_logreg"]["accuracy"] == pytest.approx(baseline.score(test.texts, test.labels))
    classes = sentiment_classes(sentiment_priors(model.names))
    top5 = np.argsort(-scores, axis=1, kind="stable")[:, :5]
    assert result["sentiment_agreement_at_5"] == pytest.approx(np.mean(classes[top5] == test.labels[:, None]), abs=1e-9)
    assert 0 < result["calibration"]["ece"] < 0.2
    probabilities = model.suggestion_probabilities(scores)
    summary = result["suggestions"]
    assert summary["top1"] == pytest.approx(probabilities.max(axis=1).mean())
    assert summary["median_emoji"] == pytest.approx(np.median(probabilities, axis=1).mean())
    classes[model.network.answers.numpy()] = [0, 1, 2]
    mass = np.mean([probabilities[i, classes == label].sum() for i, label in enumerate(test.labels)])
    assert summary["mass_on_tweet_sentiment"] == pytest.approx(mass) and mass > 0.4


def test_evaluate_another_file_and_refuse_a_changed_training_file(minilm_text_emoji, small_tweets, data_dir, tmp_path):
    out, _ = minilm_text_emoji
    other = tmp_path / "other.csv"
    with open(data_dir / "airline_tweets" / "Tweets_12000.csv", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))[-50:]  # tweets the model never saw
    with open(other, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    result = run_json("emoji", "evaluate", out, "--data", other)
    assert result["n"] == 50 and result["scored"] == "every tweet of the file" and result["train_tweets"] == 1440
    text = run("emoji", "evaluate", out, "--data", other).stdout
    assert "confusion matrix" in text and "TF-IDF + logistic regression" in text
    original = small_tweets.read_bytes()
    try:
        small_tweets.write_bytes(original.replace(b"positive", b"negative", 1))
        assert_user_error(
            run("emoji", "evaluate", out, "--data", other, check_ok=False), str(small_tweets), "changed since"
        )
    finally:
        small_tweets.write_bytes(original)
    assert_user_error(run("emoji", "evaluate", out, "--data", tmp_path / "missing.csv", check_ok=False), "missing.csv")


@pytest.fixture(scope="module")
def tiny_student(tmp_path_factory):
    """A Siamese model folder standing in for a student (`student:FOLDER` takes any): a word encoder, untrained."""
    from siamese.models.siamese import ModelConfig, SiameseModel

    texts = [t for t in read_tweets().texts[:500]]
    return SiameseModel.build(texts, ModelConfig(encoder="bow", dim=32)).save(
        tmp_path_factory.mktemp("student") / "student"
    )


@pytest.mark.parametrize("kind", ["student", "folder", "fine-tuned"])
def test_round_trip_with_each_encoder_kind(kind, tiny_student, small_vae, emojis, tmp_path):
    from siamese.emoji.text_model import TextEmojiConfig
    from siamese.emoji.text_model_train import TextEmojiTrainConfig, train_text_emoji
    from siamese.models.pretrained import default_model_path

    spec = {"student": f"student:{tiny_student}", "folder": str(default_model_path()), "fine-tuned": "minilm"}[kind]
    tweets = read_tweets()
    train, val = tweets.subset(range(200)), tweets.subset(range(200, 260))
    model = train_text_emoji(
        train,
        val,
        codes=small_vae[0].encode(emojis.images),
        names=emojis.names,
        text_encoder=spec,
        model_config=TextEmojiConfig(sentiment_aware=True, fine_tune=kind == "fine-tuned"),
        config=TextEmojiTrainConfig(epochs=1, batch_size=16),
        progress=False,
    )
    path = model.save(tmp_path / "model")
    assert (path / "text_encoder").is_dir() and json.loads((path / "config.json").read_text())[
        "text_encoder"
    ] == "text_encoder"
    texts = ["@united thanks, great crew!", "@united lost my bag again, furious"]
    loaded = TextEmojiModel.load(path)
    np.testing.assert_allclose(loaded.scores(texts), model.scores(texts), atol=1e-5)
    assert loaded.temperature == model.temperature
    if kind == "fine-tuned":  # the encoder itself moved, and the saved copy is the moved one
        from siamese.models.sentence_encoder import sentence_encoder

        original = sentence_encoder("minilm")[0].encode(texts)
        assert np.abs(loaded.encoder.encode(texts) - original).max() > 1e-4


# -- the Python API: what the commands run ------------------------------------------------------------


def _timeless(value, drop=("out", "png")):
    """A result without its timings (any key naming seconds) and the paths in ``drop``."""
    if isinstance(value, dict):
        return {k: _timeless(v, drop) for k, v in value.items() if "second" not in k and k not in drop}
    if isinstance(value, list):
        return [_timeless(v, drop) for v in value]
    return value


def _same_weights(first, second):
    from safetensors.numpy import load_file

    a, b = load_file(str(first / "model.safetensors")), load_file(str(second / "model.safetensors"))
    assert a.keys() == b.keys()
    for name in a:
        np.testing.assert_allclose(a[name], b[name], rtol=0, atol=1e-6, err_msg=name)


def test_the_python_functions_run_what_the_emoji_commands_run(tmp_path, emoji_dir, small_tweets, monkeypatch):
    """train-vae → encode → train → evaluate → suggest, each in Python and as the command on the same input:
    the same results, lines and files; GloVe (the BiLSTM's) is read from the library's default path."""
    from siamese.data.glove import load_glove
    from siamese.emoji import files, text_model_train

    vae = files.train_vae_files(tmp_path / "vae-py", images=emoji_dir, filters=4, epochs=1, progress=False)
    ran = run_json(
        "emoji", "train-vae", "--out", tmp_path / "vae", "--images", emoji_dir, "--filters", 4, "--epochs", 1
    )
    assert _timeless(vae.result) == _timeless(ran) and ran["out"] == str(tmp_path / "vae")
    assert vae.lines[-1] == f"saved to {tmp_path / 'vae-py'}" and vae.value.info["non_finite_codes"] == 0
    _same_weights(tmp_path / "vae-py", tmp_path / "vae")

    codes = files.encode_files(tmp_path / "vae", tmp_path / "codes-py.csv", images=emoji_dir)
    printed = run("emoji", "encode", tmp_path / "vae", "--out", tmp_path / "codes.csv", "--images", emoji_dir).stdout
    assert printed == "\n".join(codes.lines).replace("codes-py.csv", "codes.csv") + "\n"
    assert (tmp_path / "codes-py.csv").read_bytes() == (tmp_path / "codes.csv").read_bytes()
    assert codes.value.shape == (874, 16) and _timeless(codes.result) == {
        "emojis": 874,
        "dim": 16,
        "non_finite_codes": 0,
    }

    read = []  # the GloVe files training reads (the real reader, watched)
    monkeypatch.setattr(text_model_train, "load_glove", lambda path, **kw: read.append(path) or load_glove(path, **kw))
    options = dict(data=small_tweets, images=emoji_dir, text_encoder="bilstm", limit=400, epochs=2, seed=3)
    trained = files.train_files(tmp_path / "vae", tmp_path / "model-py", progress=False, **options)
    flags = [a for key, value in options.items() for a in (f"--{key.replace('_', '-')}", value)]
    ran = run_json("emoji", "train", "--vae", tmp_path / "vae", "--out", tmp_path / "model", "--quiet", *flags)
    assert _timeless(trained.result) == _timeless(ran) and ran["test"]["n"] == 81
    assert read == [files.default_glove(), files.default_glove()] and ran["glove"]["covered"] > 0
    assert trained.lines[-1] == f"saved to {tmp_path / 'model-py'}" and isinstance(trained.value, TextEmojiModel)
    _same_weights(tmp_path / "model-py", tmp_path / "model")
    assert (tmp_path / "model-py" / "tokenizer.json").read_bytes() == (
        tmp_path / "model" / "tokenizer.json"
    ).read_bytes()

    evaluated = files.evaluate_files(tmp_path / "model")
    assert run_json("emoji", "evaluate", tmp_path / "model") == evaluated.result
    assert run("emoji", "evaluate", tmp_path / "model").stdout == "\n".join(evaluated.lines) + "\n"
    assert evaluated.result["scored"].startswith("the model's held-out test split")

    text = "@united thank you so much, best flight ever"
    suggested = files.suggest_files(tmp_path / "model", text, k=4, png=tmp_path / "py.png", images=emoji_dir)
    command = ("emoji", "suggest", tmp_path / "model", text, "-k", 4, "--images", emoji_dir)
    assert run_json(*command, "--png", tmp_path / "cli.png") == suggested.result | {"png": str(tmp_path / "cli.png")}
    assert run(*command).stdout == "\n".join(suggested.lines[:-1]) + "\n"  # all but "wrote PNG"
    assert suggested.lines[-1] == f"wrote {tmp_path / 'py.png'}"
    assert Image.open(tmp_path / "py.png").size == Image.open(tmp_path / "cli.png").size


def test_the_python_functions_refuse_an_existing_output_before_any_work(tmp_path, small_vae, emoji_dir):
    """Each output is checked first: the inputs here would fail later (no images, no tweets, no model), so
    the error being about the output shows that nothing was read or trained; what was there is untouched."""
    from siamese.emoji import files
    from siamese.errors import OutputError

    empty, missing = tmp_path / "no-images", tmp_path / "missing"
    empty.mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("mine")
    csv_file, png = tmp_path / "codes.csv", tmp_path / "strip.png"
    csv_file.write_text("mine")
    png.write_text("mine")
    for call, path in [
        (lambda: files.train_vae_files(theirs, images=empty, epochs=1), theirs),
        (lambda: files.train_files(missing, theirs, data=missing / "tweets.csv"), theirs),
        (lambda: files.encode_files(missing, csv_file, images=empty), csv_file),
        (lambda: files.suggest_files(missing, "hello", png=png), png),
    ]:
        with pytest.raises(OutputError) as caught:
            call()
        assert str(caught.value).startswith(f"{path}: ") and "overwrite=True in Python" in str(caught.value)
    assert [p.name for p in theirs.iterdir()] == ["notes.txt"] and (theirs / "notes.txt").read_text() == "mine"
    assert csv_file.read_text() == png.read_text() == "mine"
    # the commands refuse it the same way, and replace it with --overwrite (overwrite=True)
    command = ("emoji", "encode", small_vae[1], "--out", csv_file, "--images", emoji_dir)
    assert_user_error(run(*command, check_ok=False), str(csv_file), "--overwrite")
    assert csv_file.read_text() == "mine"
    assert run_json(*command, "--overwrite")["emojis"] == 874
    assert csv_file.read_text().startswith("codepoints,char,z0,")
    assert files.encode_files(small_vae[1], csv_file, images=emoji_dir, overwrite=True).result["emojis"] == 874


def test_the_emoji_commands_take_their_options_and_defaults_from_the_library(data_dir):
    import inspect

    import typer

    from siamese.cli.emoji import emoji_app
    from siamese.emoji import files

    functions = {
        "train-vae": files.train_vae_files,
        "encode": files.encode_files,
        "generate": files.generate_files,
        "train": files.train_files,
        "evaluate": files.evaluate_files,
        "suggest": files.suggest_files,
    }
    group = typer.main.get_command(emoji_app)
    for name, function in functions.items():
        options = {p.name: p for p in group.commands[name].params}
        keywords = inspect.signature(function).parameters
        assert set(keywords) - {"progress"} <= set(options), name  # progress: not --quiet
        for keyword, parameter in keywords.items():
            if parameter.default is not parameter.empty and keyword != "progress":
                assert options[keyword].default == parameter.default, (name, keyword)
    assert options["k"].default == 5  # (suggest) the loop above compared something
    text_encoder = next(p for p in group.commands["train"].params if p.name == "text_encoder")
    assert text_encoder.default == files.DEFAULT_TEXT_ENCODER == "mpnet"
    assert files.default_glove() == (data_dir / "glove" / "glove-50d-5k.json").resolve()
    assert files.default_glove().is_file()
