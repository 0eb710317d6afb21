"""The Python habits of a sentence-transformers user, on the real MiniLM: encode a str or a list,
similarity on texts or vectors (the matrix, and pairwise), predict on a list of pairs, probability
None when uncalibrated, one-line dedupe of a list, and loading by name pointing to from_pretrained."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import siamese
from siamese import SiameseModel, datasets, fit_calibrator, read_texts
from siamese.errors import ModelError

SEED_PAIRS = [
    ("When will I see you?", "When can I see you again?"),
    ("Do they enjoy eating the dessert?", "Do they like hiking in the desert?"),
]


@pytest.fixture(scope="module")
def minilm():
    model = siamese.from_pretrained("minilm")
    model.set_threshold(0.778)  # what the demo chooses on the shared validation sets (F1)
    return model


@pytest.mark.slow  # loads MiniLM
def test_encode_a_str_gives_one_vector(minilm):
    one = minilm.encode("When will I see you?")
    many = minilm.encode(["When will I see you?", "When can I see you again?"])
    assert one.shape == (384,) and many.shape == (2, 384)
    np.testing.assert_allclose(one, many[0], atol=1e-3)
    assert minilm.encode([]).shape == (0, 384)


@pytest.mark.slow
def test_similarity_on_texts_or_vectors_pairwise_and_as_a_matrix(minilm):
    a, b = [p[0] for p in SEED_PAIRS], [p[1] for p in SEED_PAIRS]
    on_texts = minilm.similarity_pairwise(a, b)
    va, vb = minilm.encode(a), minilm.encode(b)
    assert on_texts.shape == (2,)
    np.testing.assert_allclose(minilm.similarity_pairwise(va, vb), on_texts, atol=1e-6)
    np.testing.assert_allclose(
        minilm.similarity_pairwise(torch.from_numpy(va), torch.from_numpy(vb)), on_texts, atol=1e-6
    )
    np.testing.assert_allclose(minilm.similarity_pairwise(va[0], vb[0]), on_texts[:1], atol=1e-6)  # single vectors
    assert minilm.similarity_pairwise(a[0], b[0]).shape == (1,)
    matrix = minilm.similarity(a, [*b, "a question about insurance"])
    assert matrix.shape == (2, 3)
    np.testing.assert_allclose(np.diag(matrix[:, :2]), on_texts, atol=1e-5)
    np.testing.assert_allclose(matrix, va @ minilm.encode([*b, "a question about insurance"]).T, atol=1e-5)
    with pytest.raises(ValueError, match="aligned pairs"):
        minilm.similarity_pairwise(a, b[:1])
    with pytest.raises(ValueError, match="expected \\(n, 384\\)"):
        minilm.similarity_pairwise(np.zeros((2, 3)), vb)


@pytest.mark.slow
def test_predict_on_a_list_of_pairs_judges_the_seed_examples(minilm):
    verdicts = minilm.predict(SEED_PAIRS)
    assert verdicts.tolist() == [True, False]
    assert minilm.predict([p[0] for p in SEED_PAIRS], [p[1] for p in SEED_PAIRS]).tolist() == [True, False]
    assert minilm.predict(SEED_PAIRS, threshold=0.99).tolist() == [False, False]
    with pytest.raises(ValueError, match="pairs"):
        minilm.predict(["just one list"])


@pytest.mark.slow
def test_probability_is_none_until_calibrated(minilm, data_dir):
    a, b = [p[0] for p in SEED_PAIRS], [p[1] for p in SEED_PAIRS]
    assert minilm.probability(a, b) is None
    val = datasets.load("msrp-val", data_dir).subset(range(200))
    minilm.calibrator = fit_calibrator(minilm.similarity_pairwise(val.text1, val.text2), val.labels)
    try:
        p = minilm.probability(a, b)
        assert p.shape == (2,) and 0 <= p[1] < p[0] <= 1
    finally:
        minilm.calibrator = None


@pytest.mark.slow
def test_one_line_dedupe_of_a_list(minilm, data_dir):
    questions = read_texts(data_dir / "insuranceqa/questions.csv", "question")[:400]
    texts = [*questions, questions[3], "  " + questions[10]]  # two planted copies
    found = siamese.dedupe(texts, model=minilm)
    assert found.threshold == 0.9
    assert len(found.kept) + found.removed == len(texts)
    assert questions[3] in found.kept and found.kept.count(questions[3]) == 1
    duplicates = {d.record.row for c in found.clusters for d in c.duplicates}
    assert {len(questions), len(questions) + 1} <= duplicates  # the copies are not kept
    assert all(d.similarity > 0.9 for c in found.clusters for d in c.duplicates)
    assert found.kept == [t for row, t in enumerate(texts) if row not in duplicates]
    with pytest.raises(TypeError, match="list of texts or a text file's path, not one text \\('one text'\\)"):
        siamese.dedupe("one text", model=minilm)


def test_missing_values_and_impossible_thresholds_are_one_line_errors(minilm):
    """A pandas column's NaN or a None used to fail inside the tokenizer (AttributeError), an empty list inside
    the index (IndexError), and a threshold of 90 called nothing a duplicate."""
    for call in (
        lambda: minilm.encode(["a", float("nan")]),
        lambda: minilm.similarity(["a", None], ["b"]),
        lambda: siamese.dedupe(["How do I get a loan?", float("nan")], model=minilm),
    ):
        with pytest.raises(siamese.DataError, match="texts: item 1 is (float nan|NoneType None), not a text"):
            call()
    with pytest.raises(siamese.DataError, match="no texts to de-duplicate"):
        siamese.dedupe([], model=minilm)
    with pytest.raises(siamese.ConfigError, match="90 % is 0.9"):
        minilm.predict([("a", "b")], threshold=90)


def test_one_line_dedupe_of_a_file_reads_its_text_column(minilm, data_dir, tmp_path):
    """A CSV's path: its text column found by its name (the id column is not a text), as `siamese dedupe --data`."""
    rows = (data_dir / "insuranceqa/questions.csv").read_text(encoding="utf-8").splitlines()[:201]
    path = tmp_path / "questions.csv"
    path.write_text("\n".join([*rows, rows[5]]) + "\n", encoding="utf-8")  # a planted copy of a row
    found = siamese.dedupe(path, model=minilm)
    texts = read_texts(path)
    assert len(texts) == 201 and texts[-1] == texts[4] and not texts[0].isdigit()
    same = siamese.dedupe(texts, model=minilm)
    assert found.kept == same.kept and len(found.kept) <= 200 and texts[4] in found.kept
    assert siamese.dedupe(str(path), model=minilm).kept == found.kept


def test_loading_a_pretrained_name_points_to_from_pretrained(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no folder called minilm here
    with pytest.raises(ModelError, match=r"siamese.from_pretrained\('minilm'\)"):
        SiameseModel.load("minilm")
