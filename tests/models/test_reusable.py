"""The small modules other features reuse: GloVe loading, the hinge loss, the max-pooled BiLSTM."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import torch

from siamese.data.glove import Coverage, embedding_matrix, load_glove
from siamese.data.vocabulary import Vectorizer
from siamese.errors import DataError
from siamese.models.encoders import ENCODERS, BiLSTMMaxEncoder
from siamese.models.losses import HingeLoss, hinge_loss

# -- hinge loss -----------------------------------------------------------------------------------


def test_hinge_loss_hand_computed():
    q = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    right = torch.tensor([[1.0, 1.0], [0.0, 1.0]])  # cos 0.7071, 1.0
    wrong = torch.tensor([[1.0, 0.0], [1.0, 0.0]])  # cos 1.0, 0.0
    # row 1: max(0, 0.2 - 0.7071 + 1.0) = 0.4929; row 2: max(0, 0.2 - 1 + 0) = 0
    assert hinge_loss(q, right, wrong).item() == pytest.approx(0.4929 / 2, abs=1e-4)
    assert hinge_loss(q, right, wrong, margin=1.0).item() == pytest.approx((1.2929 + 0.0) / 2, abs=1e-4)
    assert HingeLoss(margin=0.2)(q, right, wrong).item() == pytest.approx(hinge_loss(q, right, wrong).item())


def test_hinge_loss_every_wrong_answer():
    q = torch.tensor([[1.0, 0.0]])
    right = torch.tensor([[1.0, 0.0]])
    wrongs = torch.tensor([[[0.0, 1.0], [1.0, 0.0]]])  # cos 0 and 1 → terms 0 and 0.2
    assert hinge_loss(q, right, wrongs).item() == pytest.approx(0.1)
    # the same as two separate triplets
    two = hinge_loss(q.repeat(2, 1), right.repeat(2, 1), wrongs[0])
    assert hinge_loss(q, right, wrongs).item() == pytest.approx(two.item())


def test_hinge_loss_trains_apart():
    torch.manual_seed(0)
    q, right, wrong = (torch.randn(8, 4, requires_grad=True) for _ in range(3))
    opt = torch.optim.SGD([q, right, wrong], lr=0.5)
    first = hinge_loss(q, right, wrong).item()
    for _ in range(50):
        opt.zero_grad()
        loss = hinge_loss(q, right, wrong)
        loss.backward()
        opt.step()
    assert first > 0.2 and loss.item() < 0.01


# -- GloVe ----------------------------------------------------------------------------------------


def test_glove_json_shared_file(data_dir):
    path = data_dir / "glove" / "glove-50d-5k.json"
    vectors = load_glove(path)
    assert len(vectors) == 5050 and vectors["the"].shape == (50,)
    assert vectors["the"][0] == pytest.approx(0.418)
    only = load_glove(path, words={"the", "question", "zzzunknown"})
    assert set(only) == {"the", "question"}


def test_glove_text_format_and_gzip(tmp_path):
    text = "the 0.1 0.2 0.3\nquestion -1 0 1\n"
    (tmp_path / "glove.tiny.3d.txt").write_text(text)
    with gzip.open(tmp_path / "glove.tiny.3d.txt.gz", "wt") as f:
        f.write(text)
    for name in ("glove.tiny.3d.txt", "glove.tiny.3d.txt.gz"):
        v = load_glove(tmp_path / name)
        assert set(v) == {"the", "question"}
        np.testing.assert_allclose(v["question"], [-1, 0, 1])


def test_glove_bad_line_names_file_and_line(tmp_path):
    bad = tmp_path / "glove.bad.txt"
    bad.write_text("the 0.1 0.2 0.3\nquestion 1 x 2\n")
    with pytest.raises(DataError, match=r"glove.bad.txt:2: word 'question'"):
        load_glove(bad)
    with pytest.raises(DataError, match="not found"):
        load_glove(tmp_path / "missing.txt")


def test_embedding_matrix_coverage(data_dir):
    vectors = load_glove(data_dir / "glove" / "glove-50d-5k.json")
    vec = Vectorizer.fit(["What is the best way to learn English", "How do I learn xyzzyplugh"])
    vocab = vec.vocabulary()
    matrix, coverage = embedding_matrix(vocab, vectors, seed=1)
    assert matrix.shape == (len(vocab), 50) and matrix.dtype == np.float32
    assert not matrix[0].any()  # padding row
    np.testing.assert_array_equal(matrix[vocab.index("learn")], vectors["learn"])
    assert isinstance(coverage, Coverage)
    assert "xyzzyplugh" in coverage.missing and "[UNK]" in coverage.missing
    assert coverage.total == len(vocab) - 1 and coverage.covered == coverage.total - 2
    assert "covers" in str(coverage)
    # uncovered words start random, at the vectors' scale, reproducibly
    row = matrix[vocab.index("xyzzyplugh")]
    assert 0.1 < row.std() < 2.0
    np.testing.assert_array_equal(embedding_matrix(vocab, vectors, seed=1)[0], matrix)


# -- BiLSTM, max-pooled ----------------------------------------------------------------------------


def test_bilstm_max_shapes_and_padding_invariance():
    torch.manual_seed(0)
    enc = BiLSTMMaxEncoder(vocab_size=20, embedding_dim=8, hidden=6, out_dim=5).eval()
    assert ENCODERS["bilstm-max"] is BiLSTMMaxEncoder
    ids = torch.tensor([[3, 4, 5, 0, 0], [6, 7, 0, 0, 0]])
    lengths = torch.tensor([3, 2])
    out = enc(ids, lengths)
    assert out.shape == (2, 5)
    assert torch.allclose(out.norm(dim=1), torch.ones(2), atol=1e-5) or (out == 0).all(1).any()
    # the same texts without the extra padding give the same vectors (padding is masked)
    alone = enc(torch.tensor([[6, 7]]), torch.tensor([2]))
    assert torch.allclose(out[1], alone[0], atol=1e-6)
    raw = BiLSTMMaxEncoder(vocab_size=20, embedding_dim=8, hidden=6, out_dim=5, normalize=False)
    assert (raw(ids, lengths) >= 0).all()  # relu output
    assert sum(p.numel() for p in raw.lstm.parameters()) == 2 * 4 * 6 * (8 + 6 + 2)


def test_bilstm_max_glove_initialised(data_dir):
    vectors = load_glove(data_dir / "glove" / "glove-50d-5k.json")
    vec = Vectorizer.fit(["what is the best way to learn"])
    matrix, _ = embedding_matrix(vec.vocabulary(), vectors)
    enc = BiLSTMMaxEncoder(vec.vocab_size, embeddings=matrix)
    np.testing.assert_allclose(enc.embedding.weight.detach().numpy(), matrix)
    frozen = BiLSTMMaxEncoder(vec.vocab_size, embeddings=matrix, trainable_embeddings=False)
    assert not frozen.embedding.weight.requires_grad
    with pytest.raises(ValueError, match="expected"):
        BiLSTMMaxEncoder(vec.vocab_size + 1, embeddings=matrix)
