"""The static student (siamese distill): token vectors that start at the teacher's own and learn
its sentence vectors; a subword tokenizer extended with corpus words; saved, loaded and used by
every command like any bag-of-words model; clear refusals."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
import torch
from conftest import EXPLAIN_PAIRS, assert_exact_shares
from scipy.stats import spearmanr
from sklearn.decomposition import PCA
from typer.testing import CliRunner

from siamese import ModelConfig, SiameseModel, datasets, train
from siamese.cli import app
from siamese.distill import StaticConfig, default_corpus, distill_static, read_corpus
from siamese.distill.corpus import CORPUS_SETS
from siamese.errors import ConfigError, DataError
from siamese.training.bi_encoder import TrainConfig

os.environ["HF_HUB_OFFLINE"] = "1"
runner = CliRunner()


@pytest.fixture(scope="module")
def corpus(data_dir):
    """3,000 distinct STS-B / SICK training sentences."""
    pairs = datasets.load_many(["sts-train", "sick-train"], data_dir)
    return list(dict.fromkeys(pairs.text1 + pairs.text2))[:3000]


@pytest.fixture(scope="module")
def teacher():
    model = SiameseModel.build([], ModelConfig(encoder="transformer", max_length=64))
    # the precision `siamese distill` runs its teacher in (bf16 on CPUs with native bf16, else fp32),
    # not the suite's fp32: nothing here compares with Hugging Face's forward pass, and MiniLM's
    # ~30,500 token vectors are most of this module's time
    model.precision = "auto"
    return model


@pytest.fixture(scope="module")
def targets(teacher, corpus):
    """The teacher's vectors of the corpus, computed once for the distillations of the whole corpus
    below (``targets=``); the smaller ones compute their own."""
    return teacher.encode(corpus)


@pytest.fixture(scope="module")
def student(teacher, corpus, targets):
    return distill_static(
        teacher,
        corpus,
        StaticConfig(dim=64, epochs=3, extra_words=1500, val_fraction=0.1),
        teacher_info={"source": "minilm"},
        targets=targets,
        progress=False,
    )


def test_training_brings_the_student_closer_to_the_teacher_on_held_out_texts(student):
    history = student.info["distillation"]["history"]
    assert history[0]["epoch"] == 0 and len(history) == 4
    start, best = history[0]["val_cosine"], max(h["val_cosine"] for h in history)
    assert best > start + 0.03, history  # from a centred start already ~0.73 on these 3,000 STS texts
    assert min(h["val_loss"] for h in history) < 0.75 * history[0]["val_loss"], history


def test_relational_loss_is_the_kl_between_the_batchs_softmaxed_cosines():
    from scipy.special import log_softmax

    from siamese.distill.static import relational_loss

    rng = np.random.default_rng(0)
    unit = lambda x: x / np.linalg.norm(x, axis=1, keepdims=True)
    teacher, student = unit(rng.normal(size=(6, 5))), unit(rng.normal(size=(6, 5)))
    t, s = log_softmax(teacher @ teacher.T / 0.1, axis=1), log_softmax(student @ student.T / 0.1, axis=1)
    reference = float((np.exp(t) * (t - s)).sum(1).mean())  # KL(teacher || student) per text, averaged
    got = float(relational_loss(torch.tensor(student), torch.tensor(teacher), 0.1))
    assert got == pytest.approx(reference, rel=1e-5) and got > 0
    assert float(relational_loss(torch.tensor(teacher), torch.tensor(teacher), 0.1)) == pytest.approx(0, abs=1e-6)
    # A rotation keeps every cosine, so nothing to learn; the direction loss alone would see a miss.
    rotation, _ = np.linalg.qr(rng.normal(size=(5, 5)))
    assert float(relational_loss(torch.tensor(teacher @ rotation), torch.tensor(teacher), 0.1)) == pytest.approx(
        0, abs=1e-5
    )


def test_the_relational_term_is_learned_and_the_epoch_kept_is_the_lowest_held_out_loss(
    student, teacher, corpus, targets
):
    # The fixture's student: the default weight (4). Held-out loss = direction loss + 4 x KL.
    history = student.info["distillation"]["history"]
    kl = [(h["val_loss"] - (1 - h["val_cosine"])) / 4 for h in history]
    assert all(k > 0 for k in kl) and kl[-1] < kl[1] < kl[0] * 0.95 and kl[-1] < kl[0] * 0.8, (
        history
    )  # training shrinks the mismatch
    kept = min(history, key=lambda h: h["val_loss"])
    assert [h["epoch"] for h in history if h.get("kept")] == [kept["epoch"]]
    again = distill_static(
        teacher,
        corpus,
        StaticConfig(dim=64, epochs=kept["epoch"], extra_words=1500, val_fraction=0.1),
        teacher_info={"source": "minilm"},
        targets=targets,
        progress=False,
    )
    np.testing.assert_allclose(
        again.encode(corpus[:50]), student.encode(corpus[:50]), atol=1e-5
    )  # that epoch's weights
    # Without the term the held-out loss is the direction loss alone.
    plain = distill_static(
        teacher,
        corpus[:1000],
        StaticConfig(dim=32, epochs=1, extra_words=0, val_fraction=0.1, relational=0),
        progress=False,
    )
    assert all(
        h["val_loss"] == pytest.approx(1 - h["val_cosine"], abs=2e-5) for h in plain.info["distillation"]["history"]
    )


def test_the_student_ranks_unseen_pairs_like_a_similarity_model(student, data_dir):
    dev = datasets.load("sts-dev", data_dir).subset(range(400))  # not in the corpus
    rho = spearmanr(student.similarity_pairwise(dev.text1, dev.text2), dev.scores).statistic
    assert rho > 0.6, rho


def test_the_tokenizer_is_the_teachers_wordpiece_plus_corpus_words_without_special_tokens(student, teacher, corpus):
    tok = student.vectorizer.tokenizer
    teacher_size = teacher.vectorizer.tokenizer.get_vocab_size()
    assert teacher_size < tok.get_vocab_size() <= teacher_size + 1500
    # A frequent corpus word the teacher cuts into pieces is one token now.
    added = [w for w, i in tok.get_vocab().items() if i >= teacher_size]
    assert added and all(len(tok.encode(w).ids) == 1 for w in added[:50])
    assert len(teacher.vectorizer.tokenizer.encode(added[0], add_special_tokens=False).ids) > 1
    # No [CLS]/[SEP]; a word never seen still gets its pieces (no unknown token).
    ids = student.vectorizer.encode(["zyxwvutsrq glorbification"])[0]
    assert "[CLS]" not in tok.decode(list(ids), skip_special_tokens=False)
    assert tok.token_to_id("[UNK]") not in ids.tolist() and len(ids) > 2
    assert np.linalg.norm(student.encode(["zyxwvutsrq glorbification"])[0]) > 0.99


def test_the_start_is_the_teachers_token_vectors_centred_on_their_main_directions(teacher, corpus):
    untrained = distill_static(teacher, corpus[:500], StaticConfig(dim=48, epochs=0, extra_words=0), progress=False)
    info = untrained.info["distillation"]
    assert info["history"] == [{"epoch": 0, "val_loss": None, "val_cosine": None, "kept": True}]
    tok = untrained.vectorizer.tokenizer
    ids = untrained.vectorizer.encode(corpus[:500])
    seen = np.unique(np.concatenate(ids))
    seen = seen[seen != tok.token_to_id("[PAD]")]
    # An independent reference: scikit-learn's PCA of the teacher's vectors of the seen tokens alone
    # ([CLS] token [SEP], mean-pooled), as model2vec distils.
    special = teacher.vectorizer.tokenizer.encode("", add_special_tokens=True).ids
    batch = torch.tensor([[special[0], int(i), *special[1:]] for i in seen])
    with torch.no_grad():
        vectors = teacher.encoder(batch, torch.full((len(seen),), batch.shape[1])).float().numpy()
    reference = PCA(48).fit(vectors).transform(vectors)
    rows = untrained.encoder.embedding.weight[torch.as_tensor(seen)].detach().numpy()
    for k in range(8):  # the main directions (a PCA's sign is arbitrary; bf16 blurs the minor ones)
        assert abs(np.corrcoef(rows[:, k], reference[:, k])[0, 1]) > 0.98, k
    assert abs(rows.mean(0)).max() < 1e-3 * abs(rows).mean()  # centred on the corpus's tokens


def test_saved_and_loaded_the_student_gives_the_same_vectors(student, tmp_path):
    student.save(tmp_path / "s")
    again = SiameseModel.load(tmp_path / "s")
    texts = ["How do I learn Python?", "A man is playing a guitar.", "unseenwordhere"]
    np.testing.assert_allclose(again.encode(texts), student.encode(texts), atol=1e-6)
    assert again.config.tokenizer == "subwords" and again.fingerprint() == student.fingerprint()
    raw = json.loads((tmp_path / "s" / "config.json").read_text())
    raw["vocab_size"] += 1
    (tmp_path / "s" / "config.json").write_text(json.dumps(raw))
    with pytest.raises(Exception, match="vocab_size"):
        SiameseModel.load(tmp_path / "s")


def test_the_student_encodes_without_padding_to_the_padded_paths_vectors(student, data_dir, monkeypatch):
    pairs = datasets.load("quora-sample", data_dir)
    texts = pairs.text1 + pairs.text2 + ["", "Crème brûlée?", "word " * 300, "[SEP]"]
    assert student._encode_flat(texts[:3], np.empty((3, student.dim), np.float32))  # the flat path is taken
    flat = student.encode(texts)
    monkeypatch.setattr(student, "_encode_flat", lambda texts, out: False)  # the padded, length-sorted batches
    np.testing.assert_allclose(flat, student.encode(texts), atol=1e-6)
    chars = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=16, char_ngrams=(3, 4), char_buckets=64))
    assert not chars._encode_flat(texts[:3], np.empty((3, 16), np.float32))  # n-grams need padded rows


def test_static_student_shares_sum_to_the_similarity(teacher, data_dir):
    """The student's explanations are exact (siamese.evaluation.explain; here, beside the other
    students of this teacher, its token vectors are computed once)."""
    pairs = datasets.load("sts-train", data_dir)
    corpus = list(dict.fromkeys(pairs.text1 + pairs.text2))[:800]
    student = distill_static(
        teacher, corpus, StaticConfig(dim=32, epochs=1, extra_words=300, val_fraction=0.1), progress=False
    )
    assert student.config.tokenizer == "subwords"
    # "unbelievably" is cut into WordPiece pieces: they add up to one word
    assert_exact_shares(
        student, EXPLAIN_PAIRS + [("That was unbelievably good pasta.", "The pasta was incredibly tasty.")]
    )


def test_fine_tuning_starts_from_the_student_and_leaves_it_untouched(student, data_dir):
    pairs = datasets.load("msrp-train", data_dir).subset(range(400))
    before = student.encoder.embedding.weight.detach().clone()
    tuned = train(
        pairs,
        None,
        model_config=ModelConfig(loss="mnr"),
        config=TrainConfig(epochs=1, lr=1e-3),
        initial=student,
        progress=False,
    )
    assert torch.equal(student.encoder.embedding.weight, before)  # a copy was trained
    assert (
        tuned.vectorizer is student.vectorizer and tuned.config.loss == "mnr" and tuned.config.tokenizer == "subwords"
    )
    moved = (tuned.encoder.embedding.weight.detach() - before).abs().sum(1) > 0
    assert 0 < int(moved.sum()) < len(before)  # only the rows the pairs touch (lazy Adam)


def test_the_teachers_token_vectors_are_computed_once_per_teacher(teacher, monkeypatch):
    import copy

    from siamese.distill import static
    from siamese.distill.static import _own_token_vectors

    monkeypatch.setattr(static, "_LAST_TEACHER", {})  # leave the full teacher's vectors to the other tests (~30 s)

    first = _own_token_vectors(teacher, 300, False)
    assert _own_token_vectors(teacher, 300, False) is first and not first.flags.writeable
    changed = copy.deepcopy(teacher)
    with torch.no_grad():
        next(changed.encoder.parameters()).add_(0.01)
    again = _own_token_vectors(changed, 300, False)  # other weights: computed anew
    assert again is not first and not np.allclose(again, first)
    assert _own_token_vectors(changed, 200, False).shape == (200, teacher.dim)  # other tokens: anew


def test_a_words_vocabulary_works_for_any_teacher(teacher, corpus):
    words = distill_static(teacher, corpus[:800], StaticConfig(dim=32, epochs=1, vocabulary="words"), progress=False)
    assert words.config.tokenizer == "words" and words.encode(["a guitar"]).shape == (1, 32)


def test_a_corpus_past_the_sample_size_is_sampled_with_its_targets(teacher, corpus, targets, tmp_path):
    config = StaticConfig(dim=32, epochs=1, vocabulary="words", corpus_sample=300, seed=3)
    sampled = distill_static(teacher, corpus[:800], config, progress=False)
    info = sampled.info["distillation"]
    assert (info["corpus_texts"], info["corpus_distinct"], info["corpus_sample"]) == (300, 800, 300)
    sampled.save(tmp_path / "student")
    assert "on 300 of 800 texts" in (tmp_path / "student" / "README.md").read_text()
    # the teacher's vectors given for all 800 texts: the same 300 texts are taken (the same words
    # vocabulary), with their own vectors (the same student, but for bf16's batch effects: the 300
    # alone were encoded in other batches than the 800)
    given = distill_static(teacher, corpus[:800], config, targets=targets[:800], progress=False)
    assert given.vectorizer.vocabulary() == sampled.vectorizer.vocabulary()
    probe = corpus[2000:2050]
    a, b = given.encode(probe), sampled.encode(probe)
    known = np.linalg.norm(b, axis=1) > 0  # a text of words outside the vocabulary has no vector
    assert known.sum() > 40 and np.einsum("ij,ij->i", a[known], b[known]).min() > 0.999
    other = distill_static(teacher, corpus[:800], StaticConfig(**{**config.__dict__, "seed": 4}), progress=False)
    assert other.vectorizer.vocabulary() != sampled.vectorizer.vocabulary()  # another sample


def test_refusals(teacher, corpus):
    with pytest.raises(ConfigError, match="wider than the teacher"):
        distill_static(teacher, corpus[:50], StaticConfig(dim=1000), progress=False)
    with pytest.raises(DataError, match="at least 10"):
        distill_static(teacher, ["one", "two", " "], progress=False)
    with pytest.raises(ConfigError, match="vocabulary"):
        StaticConfig(vocabulary="letters").check()
    with pytest.raises(ConfigError, match="temperature"):
        StaticConfig(temperature=0).check()
    with pytest.raises(ConfigError, match="tokenizer"):
        ModelConfig(tokenizer="bytes").check()
    with pytest.raises(ConfigError, match="siamese distill"):
        SiameseModel.build(corpus[:20], ModelConfig(encoder="bow", tokenizer="subwords"))


def test_the_default_corpus_leaves_every_test_and_selection_split_out(data_dir):
    texts = set(default_corpus(data_dir))
    assert len(texts) > 100_000
    assert not {"sts-test", "msrp-test", "quora-sample", "sts-dev", "msrp-val", "semeval-dev"} & set(CORPUS_SETS)
    for name in ("quora-sample", "sts-test", "msrp-test", "paws-wiki-test", "mqp", "sts-dev"):
        held = datasets.load(name, data_dir)
        assert not texts & set(held.text1 + held.text2), name


def test_read_corpus_takes_text_files_columns_and_pair_files(tmp_path, data_dir):
    (tmp_path / "a.txt").write_text("first text\nsecond text\n\nfirst text\n")
    (tmp_path / "b.csv").write_text("id,question\n1,third text\n2,second text\n")
    assert read_corpus([tmp_path / "a.txt"]) == ["first text", "second text"]
    assert read_corpus([tmp_path / "b.csv"], column="question") == ["third text", "second text"]
    msrp = read_corpus([data_dir / "msrp" / "msr-para-val.tsv"])
    assert len(msrp) > 900


def test_cli_distill_then_every_command_uses_the_student(corpus, tmp_path, data_dir):
    corpus = corpus[:1000]
    (tmp_path / "corpus.txt").write_text("\n".join(corpus))
    out = tmp_path / "student"
    result = runner.invoke(
        app,
        [
            "distill",
            "--out",
            str(out),
            "--data",
            str(tmp_path / "corpus.txt"),
            "--dim",
            "48",
            "--epochs",
            "2",
            "--extra-words",
            "500",
            "--val-data",
            str(data_dir / "msrp" / "msr-para-val.tsv"),
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["dim"] == 48 and report["corpus_texts"] == len(corpus) and 0 < report["threshold"] < 1
    assert report["kept_epoch"] in (0, 1, 2) and 0 < report["val_cosine"] <= report["best_val_cosine"] <= 1
    assert json.loads((out / "config.json").read_text())["info"]["distillation"]["threshold_choice"]["val_pairs"] == 500
    result = runner.invoke(app, ["predict", str(out), "A man plays a guitar.", "A man is playing a guitar.", "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["similarity"] > 0.8
    result = runner.invoke(
        app, ["index", "build", str(out), "--data", str(tmp_path / "corpus.txt"), "--out", str(tmp_path / "idx")]
    )
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["search", str(tmp_path / "idx"), corpus[7], "-k", "1", "--json"])
    assert result.exit_code == 0 and corpus[7] in result.stdout


def test_cli_epochs_0_is_model2vecs_recipe_the_teacher_reads_no_corpus_text(corpus, tmp_path, data_dir, monkeypatch):
    from siamese.models.siamese import SiameseModel as Model

    read: list[str] = []
    encode = Model.encode
    monkeypatch.setattr(
        Model, "encode", lambda self, texts, *a, **k: (read.extend(texts), encode(self, texts, *a, **k))[1]
    )
    (tmp_path / "corpus.txt").write_text("\n".join(corpus[:1000]))
    out = tmp_path / "student"
    args = ["distill", "--out", str(out), "--data", str(tmp_path / "corpus.txt"), "--dim", "48", "--epochs", "0"]
    result = runner.invoke(
        app, [*args, "--extra-words", "300", "--val-data", str(data_dir / "msrp" / "msr-para-val.tsv")]
    )
    assert result.exit_code == 0, result.output
    assert "the teacher's token vectors alone (--epochs 0)" in result.output
    card = (out / "README.md").read_text()  # was: "on 1,000 texts" and "the default, not chosen on validation pairs"
    assert "Distilled from `minilm` from its token vectors alone" in card and "chosen on " + str(data_dir) in card, card
    info = json.loads((out / "config.json").read_text())["info"]["distillation"]
    added = info["tokens"] - 30522  # MiniLM's own WordPiece tokens, then the corpus words
    assert 0 < added <= 300
    texts = set(corpus[:1000])
    # The teacher read the corpus words (a token each) and the validation pairs, never a corpus text.
    assert len(read) > added and not texts & set(read) - set(read[:added])
    similarity = {}
    for other in ("A man is playing a guitar.", "The stock market fell sharply today."):
        result = runner.invoke(app, ["predict", str(out), "A man plays a guitar.", other, "--json"])
        assert result.exit_code == 0, result.output
        similarity[other] = json.loads(result.stdout)["similarity"]
    assert similarity["A man is playing a guitar."] > similarity["The stock market fell sharply today."] + 0.4, (
        similarity
    )


def test_cli_refusals_write_nothing(tmp_path, data_dir):
    (tmp_path / "tiny.txt").write_text("one\ntwo\n")
    (tmp_path / "enough.txt").write_text("\n".join(f"text number {i}" for i in range(20)))
    cases = [
        (["--data", str(tmp_path / "tiny.txt")], "at least 10"),
        (["--data", str(tmp_path / "missing.txt")], "no such file"),
        (["--data", str(tmp_path / "tiny.txt"), "--vocabulary", "letters"], "vocabulary"),
        (["--data", str(tmp_path / "enough.txt"), "--teacher", str(tmp_path / "nowhere")], "nowhere"),
        # before the teacher's pass (was: after ~25 s of it), or ignored without --fine-tune
        (["--data", str(tmp_path / "enough.txt"), "--fine-tune-loss", "cosent"], "goes with --fine-tune"),
        (
            [
                "--data",
                str(tmp_path / "enough.txt"),
                "--fine-tune",
                str(data_dir / "msrp" / "msr-para-val.tsv"),
                "--fine-tune-loss",
                "bogus",
            ],
            "unknown loss 'bogus'",
        ),  # fmt: skip
    ]
    for extra, message in cases:
        result = runner.invoke(
            app,
            [
                "distill",
                "--out",
                str(tmp_path / "out"),
                "--val-data",
                str(data_dir / "msrp" / "msr-para-val.tsv"),
                *extra,
            ],
        )
        assert result.exit_code == 2, (extra, result.output)
        assert message in result.output and len(result.output.strip().splitlines()) == 1, result.output
        assert not (tmp_path / "out").exists()
