"""The model zoo: every encoder, head and loss trains on real pairs, saves, loads and predicts;
nonsensical head/loss pairs are refused; old model folders still load."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import invoke

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.errors import ConfigError, ModelError
from siamese.evaluation.metrics import evaluate
from siamese.models.heads import HEADS
from siamese.models.losses import LOSSES, check_head_and_loss
from siamese.training.batches import weighted_rows

# (encoder, head, loss, encoder options): every encoder, head and loss at least once.
RECIPES = [
    ("bilstm", "l1", "bce", {"hidden": 48}),
    ("bilstm-max", "cosine", "hinge", {}),
    ("cnn", "cosine", "mnr", {"filters": 48}),
    ("bilstm", "manhattan", "contrastive", {"hidden": 32, "pooling": "attention"}),
    ("lstm", "symmetric", "bce", {"pooling": "attention"}),
    ("cnn", "concat", "bce", {"filters": 48}),
    ("bilstm-max", "manhattan", "triplet", {"pooling": "attention"}),
    ("bow", "cosine", "triplet", {"ngrams": 2, "buckets": 4096}),
    ("bow", "l1", "bce", {}),
]


@pytest.fixture(scope="module")
def msrp(data_dir):
    return datasets.load("msrp-train", data_dir).subset(range(1200)), datasets.load("msrp-val", data_dir)


@pytest.mark.parametrize("encoder,head,loss,options", RECIPES, ids=["-".join(r[:3]) for r in RECIPES])
def test_recipe_trains_saves_loads_predicts(msrp, tmp_path, encoder, head, loss, options):
    train_pairs, val = msrp
    config = ModelConfig(encoder=encoder, head=head, loss=loss, dim=48, encoder_options=dict(options))
    model = train(
        train_pairs, val, model_config=config, config=TrainConfig(epochs=3, batch_size=64, workers=1), progress=False
    )
    history = model.info["training"]["history"]
    assert history[-1]["loss"] < history[0]["loss"], history  # it learns
    report = evaluate(model, val)
    assert report["roc_auc"] > 0.5  # better than chance on unseen pairs

    path = model.save(tmp_path / "model")
    saved = json.loads((path / "config.json").read_text())
    assert (saved["encoder"], saved["head"], saved["loss"]) == (encoder, head, loss)
    assert all(saved["encoder_options"][k] == v for k, v in options.items())
    loaded = SiameseModel.load(path)  # the folder alone is enough
    a, b = val.text1[:30], val.text2[:30]
    np.testing.assert_allclose(loaded.similarity_pairwise(a, b), model.similarity_pairwise(a, b), atol=1e-5)
    assert loaded.fingerprint() == model.fingerprint()
    scores = loaded.similarity_pairwise(a, b)
    if HEADS[head].classifier or head == "manhattan":
        assert ((scores >= 0) & (scores <= 1)).all()
    assert loaded.predict(a, b).dtype == bool
    if head != "cosine":
        from siamese.search import DuplicateIndex, dedupe

        with pytest.raises(ModelError, match="cosine head"):
            DuplicateIndex(loaded)
        with pytest.raises(ModelError, match="cosine head"):  # refused before encoding or writing
            dedupe(loaded, a, tmp_path / "clusters.jsonl")
        assert not (tmp_path / "clusters.jsonl").exists()


def test_cosent_learns_graded_similarity(data_dir):
    """CoSENT ranks by STS-B's graded scores: the Spearman on unseen dev pairs rises above chance."""
    pairs = datasets.load("sts-train", data_dir).subset(range(2000))
    dev = datasets.load("sts-dev", data_dir)
    model = train(
        pairs,
        dev,
        model_config=ModelConfig(encoder="cnn", loss="cosent", dim=48, encoder_options={"filters": 64}),
        config=TrainConfig(epochs=3, batch_size=64, workers=1),
        progress=False,
    )
    assert model.info["training"]["history"][-1]["loss"] < model.info["training"]["history"][0]["loss"]
    assert evaluate(model, dev)["spearman"] > 20


def test_encoders_mask_padding():
    """A text encodes the same alone as in a batch padded to a longer text."""
    from siamese.models.encoders import build_encoder

    torch.manual_seed(0)
    ids = torch.tensor([[5, 6, 7, 8, 9, 10], [11, 12, 0, 0, 0, 0]])
    lengths = torch.tensor([6, 2])
    for name, options in [
        ("bilstm", {"pooling": "last"}),
        ("bilstm", {"pooling": "attention"}),
        ("bilstm", {"pooling": "max"}),
        ("cnn", {"kernel_sizes": [1, 3]}),
        ("lstm", {"pooling": "attention"}),
        ("bilstm-max", {}),
        ("bow", {"ngrams": 2, "buckets": 64}),
    ]:
        enc = (
            build_encoder(name, 20, embedding_dim=8, **options)
            if name != "lstm"
            else build_encoder(name, 20, dim=8, **options)
        )
        enc.eval()
        batch = enc(ids, lengths)
        alone = enc(ids[1:, :2], lengths[1:])
        torch.testing.assert_close(batch[1], alone[0], atol=1e-5, rtol=1e-4, msg=f"{name} {options}")


def test_bag_of_words_weighs_words_by_rarity(msrp):
    """Untrained, the bag of words scores shared rare words far above shared common ones, and
    [UNK] (different unknown words) counts for least."""
    train_pairs, _ = msrp
    model = SiameseModel.build(train_pairs.text1 + train_pairs.text2, ModelConfig(encoder="bow"))
    vocab = model.vectorizer.tokenizer.get_vocab()
    counts = model.vectorizer.counts(train_pairs.text1 + train_pairs.text2)
    rare = [w for w, i in vocab.items() if counts[i] == 1 and w.isalpha()][:2]
    log_w = model.encoder.log_weight.weight[:, 0]
    assert log_w[vocab["the"]] < log_w[vocab[rare[0]]] - 3
    assert log_w[1] == log_w.min()  # [UNK]
    shared_rare = model.similarity_pairwise([f"the {rare[0]}"], [f"a {rare[0]}"])[0]
    shared_common = model.similarity_pairwise([f"the {rare[0]}"], [f"the {rare[1]}"])[0]
    assert shared_rare > 0.9 and shared_common < 0.3, (shared_rare, shared_common)


def test_bag_of_bigrams_reads_word_order(msrp):
    train_pairs, _ = msrp
    texts = train_pairs.text1 + train_pairs.text2
    a, b = ["the company moved from boston to chicago"], ["the company moved from chicago to boston"]
    unigrams = SiameseModel.build(texts, ModelConfig(encoder="bow"))
    bigrams = SiameseModel.build(texts, ModelConfig(encoder="bow", encoder_options={"ngrams": 2}))
    assert unigrams.similarity_pairwise(a, b)[0] > 0.999  # the same bag of words
    assert bigrams.similarity_pairwise(a, b)[0] < 0.97  # its word pairs differ ("from boston" vs "from chicago")
    with pytest.raises(ConfigError, match="ngrams"):
        SiameseModel.build(texts, ModelConfig(encoder="bow", encoder_options={"ngrams": 3}))


def test_bag_of_words_shares_unseen_words_through_oov_buckets(msrp, data_dir):
    """Untrained, with words outside the vocabulary hashed into buckets, medical questions that
    share a word the (news) vocabulary never saw score higher than with them all as [UNK]."""
    train_pairs, _ = msrp
    texts = train_pairs.text1 + train_pairs.text2
    plain = SiameseModel.build(texts, ModelConfig(encoder="bow"))
    hashed = SiameseModel.build(texts, ModelConfig(encoder="bow", oov_buckets=4096))
    assert hashed.vectorizer.vocab_size == plain.vectorizer.vocab_size + 4096
    mqp = datasets.load("mqp", data_dir).subset(range(400))
    vocab, norm = plain.vectorizer.tokenizer.get_vocab(), plain.vectorizer.tokenizer.normalizer.normalize_str
    unseen = [{w for w in norm(t).split() if w not in vocab} for t in mqp.text1 + mqp.text2]
    shares = np.array([bool(unseen[i] & unseen[len(mqp) + i]) for i in range(len(mqp))])
    assert 50 < shares.sum() < len(mqp) - 50
    gain = hashed.similarity_pairwise(mqp.text1, mqp.text2) - plain.similarity_pairwise(mqp.text1, mqp.text2)
    assert gain[shares].mean() > 0.1 and gain[shares].mean() > gain[~shares].mean() + 0.1, (
        gain[shares].mean(),
        gain[~shares].mean(),
    )


def test_bag_of_words_with_oov_buckets_saves_and_loads(msrp, tmp_path):
    train_pairs, val = msrp
    config = ModelConfig(encoder="bow", dim=32, oov_buckets=512)
    model = train(
        train_pairs.subset(range(400)),
        val,
        model_config=config,
        config=TrainConfig(epochs=1, batch_size=64, workers=1),
        progress=False,
    )
    path = model.save(tmp_path / "m")
    saved = json.loads((path / "config.json").read_text())
    assert saved["oov_buckets"] == 512 and saved["vocab_size"] == model.vectorizer.vocab_size
    loaded = SiameseModel.load(path)
    unseen = ["Levothyroxine dosage for hypothyroidism", "hypothyroidism and levothyroxine"]
    np.testing.assert_array_equal(loaded.vectorizer.encode(unseen)[0], model.vectorizer.encode(unseen)[0])
    assert loaded.vectorizer.encode(unseen)[0].min() > 1  # no [UNK]
    np.testing.assert_allclose(
        loaded.similarity_pairwise(unseen[:1], unseen[1:]), model.similarity_pairwise(unseen[:1], unseen[1:]), atol=1e-6
    )
    assert loaded.fingerprint() == model.fingerprint()
    # a config.json whose oov_buckets does not fit its vocab_size is refused, not misread
    saved["oov_buckets"] = 256
    (path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ModelError, match="vocab_size .* does not match tokenizer.json"):
        SiameseModel.load(path)


def test_bag_of_words_char_ngrams_overlap_word_forms(msrp, data_dir):
    """Untrained, pooling each word's character n-grams too: word forms overlap, and the
    overlap score ranks real paraphrase and similarity pairs better than whole words alone."""
    from sklearn.metrics import roc_auc_score

    train_pairs, val = msrp
    texts = train_pairs.text1 + train_pairs.text2
    words = SiameseModel.build(texts, ModelConfig(encoder="bow", oov_buckets=4096))
    chars = SiameseModel.build(
        texts, ModelConfig(encoder="bow", oov_buckets=4096, char_ngrams=[3, 5], char_buckets=1 << 16)
    )
    assert chars.dim == 2 * words.dim  # [words, chars]
    a, b = ["patients with hypertension"], ["hypertensive patient"]
    assert chars.similarity_pairwise(a, b)[0] > words.similarity_pairwise(a, b)[0] + 0.2
    for pairs in (val, datasets.load("sts-dev", data_dir)):
        auc_words = roc_auc_score(pairs.labels, words.similarity_pairwise(pairs.text1, pairs.text2))
        auc_chars = roc_auc_score(pairs.labels, chars.similarity_pairwise(pairs.text1, pairs.text2))
        assert auc_chars > auc_words + 0.01, (auc_words, auc_chars)


def test_bag_of_words_with_char_ngrams_trains_saves_and_loads(msrp, tmp_path):
    train_pairs, val = msrp
    config = ModelConfig(
        encoder="bow",
        dim=32,
        oov_buckets=512,
        char_ngrams=[3, 5],
        char_buckets=4096,
        encoder_options={"ngrams": 2, "window": 4, "pair_mix": 0.7, "buckets": 4096, "char_mix": 0.5},
    )
    model = train(
        train_pairs.subset(range(400)),
        val,
        model_config=config,
        config=TrainConfig(epochs=1, batch_size=64, workers=1),
        progress=False,
    )
    assert model.dim == 96
    path = model.save(tmp_path / "m")
    saved = json.loads((path / "config.json").read_text())
    assert (
        saved["char_ngrams"] == [3, 5]
        and saved["char_buckets"] == 4096
        and saved["vocab_size"] == model.vectorizer.vocab_size
    )
    loaded = SiameseModel.load(path)
    texts = ["Levothyroxine dosage for hypothyroidism", "hypothyroid and levothyroxin"]
    np.testing.assert_array_equal(loaded.vectorizer.encode(texts)[1], model.vectorizer.encode(texts)[1])
    np.testing.assert_allclose(loaded.encode(texts), model.encode(texts), atol=1e-6)
    assert loaded.fingerprint() == model.fingerprint()
    saved["char_buckets"] = 2048  # does not fit vocab_size: refused, not misread
    (path / "config.json").write_text(json.dumps(saved))
    with pytest.raises(ModelError, match=r"vocab_size .* does not match tokenizer.json \(.* \+ 2048 char_buckets\)"):
        SiameseModel.load(path)


def test_oov_buckets_refused_where_they_cannot_work():
    with pytest.raises(ConfigError, match="oov_buckets must be a whole number"):
        SiameseModel.build(["a text"], ModelConfig(encoder="bow", oov_buckets=-1))
    with pytest.raises(ConfigError, match="brings its own tokenizer"):
        ModelConfig(encoder="transformer", oov_buckets=8).check()
    with pytest.raises(
        ConfigError, match=r"char_ngrams are pooled by the bag of words only \(--encoder bow\), not 'lstm'"
    ):
        ModelConfig(encoder="lstm", char_ngrams=[3, 5]).check()
    with pytest.raises(ConfigError, match="char_ngrams must be two lengths"):
        ModelConfig(encoder="bow", char_ngrams=[5, 3]).check()


def test_word_pairs_in_a_window_read_order_and_mix_as_told(msrp):
    """window=k pairs words up to k apart; pair_mix pools the pairs apart, so the cosine is
    (cos_words + m² cos_pairs) / (1 + m²)."""
    train_pairs, _ = msrp
    texts = train_pairs.text1 + train_pairs.text2
    a, b = (
        ["the company moved from boston to chicago last year"],
        ["the company moved from chicago to boston last year"],
    )
    options = {"ngrams": 2, "window": 4, "pair_mix": 0.8, "buckets": 1 << 14}
    model = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=64, encoder_options=options))
    assert model.dim == 128
    va, vb = model.encode(a)[0], model.encode(b)[0]
    words = float(va[:64] @ vb[:64] / np.linalg.norm(va[:64]) / np.linalg.norm(vb[:64]))
    pairs = float(va[64:] @ vb[64:] / np.linalg.norm(va[64:]) / np.linalg.norm(vb[64:]))
    assert words > 0.999 and pairs < 0.9  # the same words; "boston … chicago" became "chicago … boston"
    np.testing.assert_allclose(model.similarity_pairwise(a, b)[0], (words + 0.64 * pairs) / 1.64, atol=1e-5)
    for bad in (
        {"ngrams": 2, "window": 0},
        {"ngrams": 2, "window": 2.5},
        {"ngrams": 2, "pair_mix": 0},
        {"window": 3},
        {"pair_mix": 1.0},
    ):
        with pytest.raises(ConfigError, match="window|pair_mix"):
            SiameseModel.build(texts[:20], ModelConfig(encoder="bow", encoder_options=bad))


def test_adjacent_word_pairs_keep_the_first_bigram_formula():
    """ngrams=2 without window/pair_mix is the bag of bigrams folders were saved with: one weighted
    mean over word vectors and adjacent pair vectors."""
    from siamese.models.encoders import BagOfWordsEncoder
    from siamese.models.encoders.bow import _PRIME

    torch.manual_seed(0)
    enc = BagOfWordsEncoder(
        30, embedding_dim=8, word_counts=np.arange(30) + 1, ngrams=2, buckets=64, bigram_weight=0.5
    ).eval()
    ids, lengths = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]]), torch.tensor([4, 2])
    with torch.no_grad():
        for row, n in zip(ids, lengths.tolist()):
            w = enc.log_weight(row[:n]).squeeze(-1)
            pair_w = ((w[:-1] + w[1:]) / 2 + np.log(0.5)).exp()
            pair_vec = enc.bigrams.weight[(row[: n - 1] * _PRIME + row[1:n]) % 64]
            mean = ((w.exp()[:, None] * enc.embedding(row[:n])).sum(0) + (pair_w[:, None] * pair_vec).sum(0)) / (
                w.exp().sum() + pair_w.sum()
            )
            torch.testing.assert_close(
                enc(row[None, :n], torch.tensor([n]))[0], mean / mean.norm(), atol=1e-6, rtol=1e-5
            )


def test_vocabulary_holds_words_of_pairs_the_loss_skips(msrp):
    """The triplet loss trains on duplicates only, yet words seen only in non-duplicates get their
    own ids (they still tell texts apart) instead of all becoming [UNK]."""
    train_pairs, val = msrp
    negatives = train_pairs.subset([i for i, y in enumerate(train_pairs.labels) if y == 0][:200])
    only_there = {w for t in negatives.text1 for w in t.lower().split() if w.isalpha()}
    only_there -= {
        w
        for i, y in enumerate(train_pairs.labels)
        if y == 1
        for t in (train_pairs.text1[i], train_pairs.text2[i])
        for w in t.lower().split()
    }
    assert only_there
    model = train(
        train_pairs, val, model_config=ModelConfig(dim=16), config=TrainConfig(epochs=1, workers=1), progress=False
    )
    vocab = model.vectorizer.tokenizer.get_vocab()
    assert all(w in vocab for w in only_there)


def test_bilstm_last_states_are_both_directions():
    """'last' = the forward state after the last real token and the backward state after the first."""
    from siamese.models.encoders import BiLSTMEncoder

    torch.manual_seed(0)
    enc = BiLSTMEncoder(20, embedding_dim=4, hidden=3, normalize=False).eval()
    ids, lengths = torch.tensor([[3, 4, 5, 0]]), torch.tensor([3])
    out = enc(ids, lengths)[0]
    states, _ = enc.lstm(enc.embedding(ids[:, :3]))  # unpadded reference
    torch.testing.assert_close(out, torch.cat([states[0, 2, :3], states[0, 0, 3:]]))


@pytest.mark.parametrize(
    "head,loss",
    [("cosine", "bce"), ("l1", "triplet"), ("concat", "mnr"), ("symmetric", "contrastive"), ("l1", "hinge")],
)
def test_refuses_head_loss_pairs_that_cannot_train(head, loss):
    with pytest.raises(ConfigError, match=f"loss '{loss}' works with heads") as err:
        check_head_and_loss(head, loss)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError):
        SiameseModel.build(["a text"], ModelConfig(head=head, loss=loss))


def test_glove_only_for_encoders_with_a_word_embedding_to_start():
    with pytest.raises(
        ConfigError, match="encoder 'lstm' does not start from GloVe vectors; these do: bilstm, bilstm-max, cnn"
    ):
        SiameseModel.build(["a text"], ModelConfig(glove="glove.txt"))


def test_every_sensible_pair_is_accepted():
    accepted = {(h, l) for h in HEADS for l in LOSSES if not _refused(h, l)}
    assert ("cosine", "triplet") in accepted and ("l1", "bce") in accepted and ("manhattan", "bce") in accepted
    # 5 losses x 2 similarity heads (cosine, manhattan) + bce x 4 heads + distill (cosine: its targets are cosines)
    assert (
        len(accepted) == 5 * 2 + 4 + 1
        and ("cosine", "distill") in accepted
        and ("manhattan", "distill") not in accepted
    )


def _refused(head, loss):
    try:
        check_head_and_loss(head, loss)
    except ConfigError:
        return True
    return False


def test_cli_refuses_with_one_line(tmp_path, data_dir):
    out = tmp_path / "m"
    r = invoke(
        "train",
        "--data",
        str(data_dir / "msrp/msr-para-val.tsv"),
        "--out",
        str(out),
        "--head",
        "cosine",
        "--loss",
        "bce",
        "-q",
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "use --loss contrastive" in r.stderr
    assert not out.exists()
    r = invoke("train", "--data", str(data_dir / "msrp/msr-para-val.tsv"), "--out", str(out), "--encoder", "gru", "-q")
    assert r.returncode == 2 and "unknown encoder 'gru'" in r.stderr and not out.exists()
    r = invoke(
        "train",
        "--data",
        str(data_dir / "msrp/msr-para-val.tsv"),
        "--out",
        str(out),
        "--encoder",
        "cnn",
        "-o",
        "kernel_width=3",
        "-q",
    )
    assert r.returncode == 2 and "kernel_width" in r.stderr and r.stderr.count("\n") == 1 and not out.exists()


def test_cli_trains_a_glove_bilstm_on_weighted_sets(tmp_path, data_dir):
    out = tmp_path / "bilstm"
    r = invoke(
        "train",
        "--data",
        str(data_dir / "msrp/msr-para-val.tsv"),
        "--data",
        str(data_dir / "mqp/mqp.csv"),
        "--weight",
        "2",
        "--weight",
        "0.25",
        "--encoder",
        "bilstm",
        "--head",
        "l1",
        "--loss",
        "bce",
        "-o",
        "hidden=32",
        "--glove",
        str(data_dir / "glove/glove-50d-5k.json"),
        "--epochs",
        "1",
        "--batch-size",
        "64",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["recipe"] == {"encoder": "bilstm", "head": "l1", "loss": "bce"}
    assert 0.2 < result["glove"]["fraction"] < 1.0  # the 5k-word GloVe misses rare and medical words
    config = json.loads((out / "config.json").read_text())
    assert config["encoder_options"] == {"hidden": 32, "embedding_dim": 50}
    model = SiameseModel.load(out)
    assert model.encoder.embedding.weight.shape[1] == 50
    # ~2 x 450 (msrp-val after the validation split) + 0.25 x 2,740 (mqp) labelled pairs per epoch
    assert 1400 < model.info["training"]["history"][0]["pairs"] < 1800
    r = invoke("predict", str(out), "How do I treat a cold?", "What cures a cold?", "--json")
    assert r.returncode == 0 and 0 <= json.loads(r.stdout)["similarity"] <= 1
    r = invoke(
        "train",
        "--data",
        str(data_dir / "msrp/msr-para-val.tsv"),
        "--weight",
        "1",
        "--weight",
        "2",
        "--out",
        str(tmp_path / "x"),
        "-q",
    )
    assert r.returncode == 2 and "--weight given 2 times for 1 --data files" in r.stderr
    r = invoke(
        "train", "--data", str(data_dir / "msrp/msr-para-val.tsv"), "--weight", "0", "--out", str(tmp_path / "x"), "-q"
    )
    assert r.returncode == 2 and "every --weight is 0" in r.stderr and not (tmp_path / "x").exists()


def test_cli_trains_a_bag_of_bigrams(tmp_path, data_dir):
    out = tmp_path / "bow"
    r = invoke(
        "train",
        "--data",
        str(data_dir / "msrp/msr-para-val.tsv"),
        "--encoder",
        "bow",
        "-o",
        "ngrams=2",
        "-o",
        "buckets=2048",
        "--dim",
        "64",
        "--epochs",
        "2",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["recipe"]["encoder"] == "bow"
    config = json.loads((out / "config.json").read_text())
    assert config["encoder_options"] == {"ngrams": 2, "buckets": 2048, "embedding_dim": 64}
    model = SiameseModel.load(out)
    assert tuple(model.encoder.bigrams.weight.shape) == (2048, 64)
    r = invoke(
        "predict",
        str(out),
        "The company moved from Boston to Chicago.",
        "The company moved from Chicago to Boston.",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert 0.5 < json.loads(r.stdout)["similarity"] < 0.999


def test_cli_trains_a_bag_of_ordered_pairs_and_char_ngrams(tmp_path, data_dir):
    """The zoo's bag-of-words recipes from the command line (smaller tables), with character n-grams."""
    out = tmp_path / "bow-pairs"
    r = invoke(
        "train",
        "--data",
        str(data_dir / "msrp/msr-para-val.tsv"),
        "--encoder",
        "bow",
        "--oov-buckets",
        "1024",
        "--max-vocab",
        "0",
        "-o",
        "ngrams=2",
        "-o",
        "window=12",
        "-o",
        "pair_mix=0.7",
        "-o",
        "buckets=4096",
        "--char-ngrams",
        "3-5",
        "--char-buckets",
        "4096",
        "--dim",
        "32",
        "--epochs",
        "2",
        "--out",
        str(out),
        "--json",
        "-q",
    )
    assert r.returncode == 0, r.stderr
    config = json.loads((out / "config.json").read_text())
    assert config["oov_buckets"] == 1024 and config["max_vocab"] is None
    assert config["char_ngrams"] == [3, 5] and config["char_buckets"] == 4096
    assert config["encoder_options"] == {
        "ngrams": 2,
        "window": 12,
        "pair_mix": 0.7,
        "buckets": 4096,
        "embedding_dim": 32,
    }
    model = SiameseModel.load(out)
    assert model.vectorizer.oov_buckets == 1024 and model.dim == 96
    r = invoke(
        "predict",
        str(out),
        "Was the zyxomatic filter moved from Boston to Chicago?",
        "Was the zyxomatic filter moved from Chicago to Boston?",
        "--json",
    )
    assert r.returncode == 0, r.stderr
    assert 0.3 < json.loads(r.stdout)["similarity"] < 0.99
    for bad in (
        ["--oov-buckets", "-5"],
        ["-o", "ngrams=2", "-o", "window=0"],
        ["--char-ngrams", "3-x"],
        ["--char-ngrams", "5-3"],
    ):
        r = invoke(
            "train",
            "--data",
            str(data_dir / "msrp/msr-para-val.tsv"),
            "--encoder",
            "bow",
            *bad,
            "--out",
            str(tmp_path / "bad"),
            "-q",
        )
        assert r.returncode == 2 and not (tmp_path / "bad").exists(), r.stderr


def test_weighted_rows_draw_each_set_in_proportion():
    rng = np.random.default_rng(0)
    weights = np.concatenate([np.full(1000, 2.0), np.full(1000, 0.25), np.zeros(100)])
    rows = weighted_rows(weights, rng)
    counts = np.bincount(rows, minlength=len(weights))
    assert (counts[:1000] == 2).all() and counts[2000:].sum() == 0
    assert 200 < counts[1000:2000].sum() < 300 and counts[1000:2000].max() == 1


def test_old_model_folders_still_load(trained, tmp_path):
    """A folder written before encoder/head/loss options existed loads as the default LSTM."""
    old = tmp_path / "old"
    old.mkdir()
    for name in ("tokenizer.json", "model.safetensors"):
        (old / name).write_bytes((trained.path / name).read_bytes())
    config = json.loads((trained.path / "config.json").read_text())
    for key in ("loss", "encoder_options", "glove"):
        config.pop(key)
    config["dim"] = 128
    (old / "config.json").write_text(json.dumps(config))
    model = SiameseModel.load(old)
    assert (model.config.encoder, model.config.head, model.config.loss) == ("lstm", "cosine", "triplet")
    a, b = trained.val_pairs.text1[:20], trained.val_pairs.text2[:20]
    np.testing.assert_allclose(model.similarity_pairwise(a, b), trained.model.similarity_pairwise(a, b), atol=1e-6)
    assert model.fingerprint() == old_fingerprint(model)  # indexes built by the old model still match


def old_fingerprint(model) -> str:
    """The fingerprint as the first model format computed it (before encoder/head/loss options)."""
    import hashlib

    old_fields = ("encoder", "dim", "head", "lowercase", "max_vocab", "min_frequency", "max_length", "seed")
    h = hashlib.sha256()
    h.update(json.dumps({k: getattr(model.config, k) for k in old_fields}, sort_keys=True).encode())
    h.update(model.vectorizer.tokenizer.to_str().encode())
    for name, tensor in sorted(model.encoder.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def test_summary_table_and_png(trained, tmp_path):
    text = trained.model.summary()
    lines = text.splitlines()
    assert 'encoder "lstm"' in lines[0] and "Output Shape" in lines[2]
    # Keras counts: Embedding vocab x 128; LSTM 4 x 128 x (128 + 128 + 2) (PyTorch keeps two bias vectors)
    vocab = trained.model.vectorizer.vocab_size
    assert any(l.startswith("encoder.embedding (Embedding)") and l.rstrip().endswith(f"{vocab * 128:,}") for l in lines)
    assert any(
        l.startswith("encoder.lstm (LSTM)") and "(None, None, 128)" in l and l.endswith(f"{4 * 128 * 258:,}")
        for l in lines
    )
    assert any(l.startswith("encoding (mean, L2)") and "(None, 128)" in l for l in lines)
    assert f"Total params: {vocab * 128 + 4 * 128 * 258:,}" in text

    png = tmp_path / "arch.png"
    r = invoke("summary", str(trained.path), "--png", str(png), "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["total_params"] == vocab * 128 + 4 * 128 * 258
    assert [row["kind"] for row in result["layers"]] == ["Embedding", "LSTM", "Pooling", "CosineHead"]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000


def test_summary_of_classifier_head_counts_its_dense_layer():
    model = SiameseModel.build(
        ["how do I learn english", "what is the best way"],
        ModelConfig(
            encoder="cnn", head="symmetric", loss="bce", dim=16, encoder_options={"filters": 8, "kernel_sizes": [2, 3]}
        ),
    )
    text = model.summary()
    assert "encoder.convs.0 (Conv1d)" in text and "(None, 8, None)" in text
    assert "head: [|a - b|, a*b] -> Dense(1, sigmoid)" in text and "(None,)" in text
    head_line = next(l for l in text.splitlines() if l.startswith("head:"))
    assert head_line.endswith(f"{2 * 16 + 1:,}")  # Dense over [|a-b|, a*b] of two 16-wide encodings


def test_warmup_steps_damp_the_first_updates(msrp):
    """With a long linear warm-up the same few steps move the weights far less."""
    train_pairs, _ = msrp
    pairs, moved = train_pairs.subset(range(300)), {}
    for warmup in (0, 10_000):
        config = ModelConfig(encoder="cnn", dim=16, encoder_options={"filters": 16})
        model = train(
            pairs,
            None,
            model_config=config,
            config=TrainConfig(epochs=1, batch_size=64, workers=1, warmup_steps=warmup),
            progress=False,
        )
        start = SiameseModel.build(pairs.text1 + pairs.text2, config)  # the same vocabulary and seed
        moved[warmup] = (model.encoder.convs[0].weight - start.encoder.convs[0].weight).abs().mean().item()
    assert moved[10_000] < 0.05 * moved[0]
