"""Code written for sentence-transformers, run on a siamese model: the same keywords, the same
shapes, the same numbers as the real sentence-transformers gives on the same MiniLM weights
(docs/sentence-transformers.md), and a one-line error naming the siamese way for what has no
counterpart."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import siamese
from siamese.models.pretrained import model_folder

TEXTS = [
    "When will I see you?",
    "When can I see you again?",
    "Do they enjoy eating the dessert?",
    "Do they like hiking in the desert?",
]

pytestmark = pytest.mark.slow  # loads MiniLM twice


@pytest.fixture(scope="module")
def ours():
    return siamese.from_pretrained("minilm").to("cpu")


@pytest.fixture(scope="module")
def theirs():
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(model_folder("minilm")), device="cpu")


@pytest.fixture(scope="module")
def vectors(ours, theirs):
    # fp32 on both sides: the numbers compared are the library's, not bf16's rounding
    return ours.encode(TEXTS, precision="fp32"), theirs.encode(TEXTS)


def test_similarity_is_the_matrix_sentence_transformers_returns(ours, theirs, vectors):
    mine, st = vectors
    expected = theirs.similarity(st, st)
    got = ours.similarity(mine, mine)
    assert got.shape == tuple(expected.shape) == (4, 4)  # not four 1.0s: every text against every text
    np.testing.assert_allclose(got, expected.numpy(), atol=1e-4)
    one_row = ours.similarity(mine[:1], mine)  # the habit that was refused as "pairs need as many of each"
    np.testing.assert_allclose(one_row, theirs.similarity(st[:1], st).numpy(), atol=1e-4)
    np.testing.assert_allclose(ours.similarity(TEXTS[:2], TEXTS), got[:2], atol=1e-3)  # texts work too (bf16 or not)


def test_similarity_pairwise_is_sentence_transformers_similarity_pairwise(ours, theirs, vectors):
    mine, st = vectors
    expected = theirs.similarity_pairwise(st[::2], st[1::2]).numpy()
    np.testing.assert_allclose(ours.similarity_pairwise(mine[::2], mine[1::2]), expected, atol=1e-4)
    with pytest.raises(ValueError, match="every a against every b: similarity"):
        ours.similarity_pairwise(mine[:1], mine)


def test_encode_takes_the_sentence_transformers_keywords(ours, theirs, vectors):
    mine, st = vectors
    np.testing.assert_allclose(mine, st, atol=1e-4)
    as_tensor = ours.encode(TEXTS, convert_to_tensor=True, batch_size=2, precision="fp32")
    assert isinstance(as_tensor, torch.Tensor) and as_tensor.shape == (4, 384)
    st_tensor = theirs.encode(TEXTS, convert_to_tensor=True)
    np.testing.assert_allclose(as_tensor.numpy(), st_tensor.numpy(), atol=1e-4)
    # tensors in, a tensor out, as sentence-transformers' similarity gives
    scores = ours.similarity(as_tensor, as_tensor)
    assert isinstance(scores, torch.Tensor)
    np.testing.assert_allclose(scores.numpy(), theirs.similarity(st_tensor, st_tensor).numpy(), atol=1e-4)

    rows = ours.encode(TEXTS, convert_to_numpy=False, precision="fp32")
    st_rows = theirs.encode(TEXTS, convert_to_numpy=False)
    assert isinstance(rows, list) and len(rows) == len(st_rows) == 4
    assert all(isinstance(r, torch.Tensor) and r.shape == (384,) for r in rows)

    one = ours.encode(TEXTS[0], convert_to_tensor=True, precision="fp32")
    assert one.shape == theirs.encode(TEXTS[0], convert_to_tensor=True).shape == (384,)

    normalised = ours.encode(TEXTS, normalize_embeddings=True, show_progress_bar=False, precision="fp32")
    np.testing.assert_allclose(normalised, theirs.encode(TEXTS, normalize_embeddings=True), atol=1e-4)
    np.testing.assert_allclose(np.linalg.norm(normalised, axis=1), 1.0, atol=1e-5)

    short = ours.encode(TEXTS, truncate_dim=64, precision="fp32")
    np.testing.assert_allclose(short, theirs.encode(TEXTS, truncate_dim=64), atol=1e-4)

    prompted = ours.encode(TEXTS, prompt="query: ", device="cpu", precision="float32")
    np.testing.assert_allclose(prompted, theirs.encode(TEXTS, prompt="query: ", device="cpu"), atol=1e-4)
    np.testing.assert_allclose(ours.encode_query(TEXTS, precision="fp32"), mine, atol=1e-6)
    np.testing.assert_allclose(ours.encode_document(TEXTS, precision="fp32"), mine, atol=1e-6)


def test_the_dimension_and_the_similarity_function_by_their_sentence_transformers_names(ours, theirs):
    assert ours.get_embedding_dimension() == theirs.get_embedding_dimension() == 384
    assert ours.get_sentence_embedding_dimension() == 384  # the name sentence-transformers 3 to 5 code uses
    assert ours.get_max_seq_length() == theirs.get_max_seq_length() == 256
    assert ours.similarity_fn_name == theirs.similarity_fn_name == "cosine"
    assert ours.max_seq_length == 256 and theirs.max_seq_length == 256
    with pytest.raises(AttributeError, match="fixed when it is built"):
        ours.max_seq_length = 128  # would otherwise be set and silently ignored


@pytest.mark.parametrize(
    ("keywords", "fragment"),
    [
        ({"precision": "int8"}, "quantize_embeddings"),
        ({"precision": "binary"}, "quantize_embeddings"),
        ({"output_value": "token_embeddings"}, "whole texts only"),
        ({"prompt_name": "query"}, "prompt=..."),
        ({"pool": object()}, "--engine ray"),
        ({"truncate_dim": 1000}, "truncate_dim must be"),
    ],
)
def test_what_has_no_counterpart_is_one_line_naming_the_siamese_way(ours, keywords, fragment):
    with pytest.raises(ValueError) as caught:
        ours.encode(TEXTS, **keywords)
    message = str(caught.value)
    assert fragment in message and "\n" not in message


@pytest.mark.parametrize(
    "name, short",
    [
        ("all-MiniLM-L6-v2", "minilm"),
        ("sentence-transformers/all-MiniLM-L6-v2", "minilm"),
        ("all-mpnet-base-v2", "mpnet"),
        ("sentence-transformers/all-mpnet-base-v2", "mpnet"),
    ],
)
def test_the_models_own_names_are_the_bundled_weights(name, short):
    """`SentenceTransformer("all-MiniLM-L6-v2")` habits: the model's own name (with or without its hub owner) is the
    bundled folder, as the short name is, wherever a model is named (from_pretrained, --from, --teacher, --verify);
    nothing is fetched. A name that is not bundled still says which are."""
    assert model_folder(name) == model_folder(short)
    if short == "minilm":
        assert np.allclose(siamese.from_pretrained(name).encode(TEXTS), siamese.from_pretrained(short).encode(TEXTS))
    with pytest.raises(siamese.ModelError, match="one of: minilm, mpnet\\)$"):
        siamese.from_pretrained("sentence-transformers/all-MiniLM-L12-v2")
