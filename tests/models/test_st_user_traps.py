"""What a sentence-transformers user tries first, on the real MiniLM and real folders: its folder where a siamese
model folder is expected, ``SiameseModel.from_pretrained``, ``similarity`` on what ``encode(...,
convert_to_numpy=False)`` returns, ``encode`` of something that is no text, ``predict`` of one pair or a
DataFrame, and ``show_progress_bar``. Each works as that user expects, or is one line saying what to do."""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
import torch

import siamese
from siamese import SiameseModel
from siamese.models.loading import load_model
from siamese.models.pretrained import default_model_path

pytestmark = pytest.mark.slow  # MiniLM

PAIRS = [
    ("When will I see you?", "When can I see you again?"),
    ("Do they enjoy eating the dessert?", "Do they like hiking in the desert?"),
]
TEXTS = [t for pair in PAIRS for t in pair]


@pytest.fixture(scope="module")
def minilm():
    model = siamese.from_pretrained("minilm").to("cpu")
    model.set_threshold(0.778)  # what the demo chooses on the shared validation sets (F1)
    return model


def _one_line(error: BaseException) -> str:
    message = str(error)
    assert message and "\n" not in message, message
    return message


# -- 1. a sentence-transformers folder where a siamese model folder is expected ---------------------------


def _sentence_transformers_advice(folder, kind="sentence-transformers") -> str:
    return (
        f"{folder}: a {kind} folder, not a siamese model folder; build one with "
        f"siamese.from_pretrained('{folder}') (CLI: siamese pretrained {folder} --out FOLDER), then load FOLDER"
    )


def test_loading_a_sentence_transformers_folder_says_to_build_a_model_from_it():
    """It said ``.../config.json: unsupported model format None (expected siamese-model/1)``."""
    folder = default_model_path()
    for load in (SiameseModel.load, load_model):
        with pytest.raises(siamese.ModelError) as caught:
            load(folder)
        assert _one_line(caught.value) == _sentence_transformers_advice(folder)


def test_a_hugging_face_folder_and_an_older_sentence_transformers_layout_are_told_so_too(tmp_path):
    """A plain Hugging Face folder (no modules.json), and a sentence-transformers folder whose model sits in
    0_Transformer/ (no config.json of its own): real files of the bundled MiniLM, linked."""
    source = default_model_path()
    plain = tmp_path / "hf"
    plain.mkdir()
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (plain / name).symlink_to(source / name)
    older = tmp_path / "st"
    (older / "0_Transformer").mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        (older / "0_Transformer" / name).symlink_to(source / name)
    (older / "modules.json").write_text(
        '[{"idx": 0, "name": "0", "path": "0_Transformer", "type": "sentence_transformers.models.Transformer"}]'
    )
    for folder, kind in ((plain, "Hugging Face"), (older, "sentence-transformers")):
        with pytest.raises(siamese.ModelError) as caught:
            SiameseModel.load(folder)
        assert _one_line(caught.value) == _sentence_transformers_advice(folder, kind)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(siamese.ModelError, match="not a siamese model folder \\(no config.json\\)$"):
        SiameseModel.load(empty)  # as before: nothing here says sentence-transformers


@pytest.mark.parametrize(
    "command",
    [["predict", "{folder}", "a b", "a c"], ["evaluate", "{folder}", "--data", "{data}"], ["serve", "{folder}"]],
)
def test_the_commands_say_it_in_one_line_and_exit_2(command, tmp_path):
    folder = default_model_path()
    data = tmp_path / "pairs.csv"
    data.write_text("text1,text2,label\na b,a c,1\nx,y,0\n")
    argv = [part.format(folder=folder, data=data) for part in command]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "siamese", *argv], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"error: {_sentence_transformers_advice(folder)}"


def test_following_the_advice_gives_a_folder_that_loads(tmp_path):
    folder = default_model_path()
    model = SiameseModel.from_pretrained(folder, device="cpu")  # the advice, by the class's own name (2.)
    saved = model.save(tmp_path / "model")
    loaded = SiameseModel.load(saved, device="cpu")
    assert loaded.threshold == model.threshold
    np.testing.assert_allclose(loaded.encode(TEXTS), model.encode(TEXTS), atol=1e-6)


# -- 2. SiameseModel.from_pretrained -----------------------------------------------------------------------


def test_from_pretrained_on_the_class_is_siamese_from_pretrained(minilm):
    """The Hugging Face habit raised AttributeError. The same signature and the same model, threshold included."""
    assert inspect.signature(SiameseModel.from_pretrained) == inspect.signature(siamese.from_pretrained)
    val = [(a, b, 1) for a, b in PAIRS[:1]] + [(a, b, 0) for a, b in PAIRS[1:]] + [(TEXTS[0], TEXTS[3], 0)]
    ours = SiameseModel.from_pretrained("minilm", val, device="cpu")
    theirs = siamese.from_pretrained("minilm", val, device="cpu")
    assert type(ours) is SiameseModel
    assert ours.threshold == theirs.threshold != 0.7  # chosen on val, not the default
    assert ours.info["pretrained"] == theirs.info["pretrained"]
    np.testing.assert_array_equal(ours.encode(TEXTS), minilm.encode(TEXTS))
    assert "siamese.from_pretrained" in SiameseModel.from_pretrained.__doc__


# -- 3. similarity on what encode(..., convert_to_numpy=False) returns -----------------------------------


def test_similarity_takes_the_list_of_vectors_encode_returns(minilm):
    """It said ``texts: item 0 is Tensor tensor([...]), not a text``; sentence-transformers takes it."""
    rows = minilm.encode(TEXTS, convert_to_numpy=False)
    matrix = minilm.encode(TEXTS)
    expected = minilm.similarity(matrix, matrix)
    got = minilm.similarity(rows, rows)
    assert isinstance(got, torch.Tensor) and got.shape == (4, 4)  # tensors in, a tensor out
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)
    arrays = list(matrix)  # a list of 1-D arrays: an array out
    np.testing.assert_allclose(minilm.similarity(tuple(arrays), TEXTS[:2]), expected[:, :2], atol=1e-3)
    np.testing.assert_allclose(minilm.similarity_pairwise(rows, arrays).numpy(), np.diag(expected), atol=1e-6)
    assert minilm.predict(rows[::2], rows[1::2]).tolist() == [True, False]  # vectors of pairs, as similarity takes

    with pytest.raises(ValueError) as caught:  # ragged: truncated rows mixed with whole ones
        minilm.similarity([rows[0], rows[1][:64]], rows)
    assert "1-D vectors of one length" in _one_line(caught.value)
    for bad in ([rows[0], TEXTS[0]], [[0.1] * 384], 5):
        with pytest.raises((siamese.DataError, TypeError)) as caught:
            minilm.similarity(bad, TEXTS)
        message = _one_line(caught.value)
        assert "similarity takes" in message and "list of 1-D arrays or tensors" in message, message


# -- 4. encode of something that is no text -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "error", "said"),
    [
        (5, TypeError, "got int 5"),  # was: 'int' object is not iterable
        (None, TypeError, "got NoneType None"),
        (b"a text", TypeError, "got bytes b'a text'"),
        ([1, 2], siamese.DataError, "texts: item 0 is int 1, not a text"),  # was: ...; drop or fill missing values
    ],
)
def test_encode_of_no_text_says_what_it_takes(minilm, value, error, said):
    with pytest.raises(error) as caught:
        minilm.encode(value)
    message = _one_line(caught.value)
    assert said in message and "a text or a list of texts" in message, message


def test_a_missing_value_is_still_told_to_be_dropped_or_filled(minilm):
    for value in (["a", float("nan")], ["a", None], pd.Series(["a", None])):
        with pytest.raises(siamese.DataError, match="item 1 is .*, not a text; drop or fill missing values first$"):
            minilm.encode(value)


# -- 5. predict of one pair, of a DataFrame -----------------------------------------------------------------


def test_predict_takes_one_pair_a_table_or_pairs(minilm):
    expected = [True, False]
    assert minilm.predict(PAIRS).tolist() == expected  # as before
    assert minilm.predict([p[0] for p in PAIRS], [p[1] for p in PAIRS]).tolist() == expected
    one = minilm.predict(PAIRS[0])  # was: "predict takes a list of (text1, text2) pairs"
    assert one is True and minilm.predict(PAIRS[1]) is False
    assert minilm.predict(*PAIRS[0]) is True and minilm.predict(*PAIRS[1]) is False  # two texts: one pair too
    assert minilm.predict(list(PAIRS[0])) is True  # as sentence-transformers' CrossEncoder reads a list of two texts
    unlabelled = pd.DataFrame({"id": [7, 8], "question1": [a for a, _ in PAIRS], "question2": [b for _, b in PAIRS]})
    assert minilm.predict(unlabelled).tolist() == expected  # no label column needed
    labelled = {"sentence1": [a for a, _ in PAIRS], "sentence2": [b for _, b in PAIRS], "label": [0, 0]}
    assert minilm.predict(labelled).tolist() == expected  # the labels are not read
    pairs = siamese.Pairs([a for a, _ in PAIRS], [b for _, b in PAIRS], np.ones(2, np.int8))
    assert minilm.predict(pairs).tolist() == expected
    assert minilm.predict(pd.DataFrame({"text1": [], "text2": []})).shape == (0,)

    with pytest.raises(siamese.DataError) as caught:
        minilm.predict(pd.DataFrame({"left": ["a"], "right": ["b"]}))
    assert _one_line(caught.value).endswith("its columns: left, right")
    with pytest.raises(siamese.DataError) as caught:
        minilm.predict(pd.DataFrame({"text1": ["a", None], "text2": ["b", "c"]}))
    assert _one_line(caught.value).startswith("predict: column 'text1': item 1 is")
    for bad in (["just one list"], "a text", 5, [("a", "b", 1)]):
        with pytest.raises(ValueError) as caught:
            minilm.predict(bad)
        assert _one_line(caught.value).startswith("predict takes a pair (text1, text2), a list of (text1, text2) pairs")


# -- 6. show_progress_bar -----------------------------------------------------------------------------------


def test_show_progress_bar_is_the_progress_output(minilm, capsys, monkeypatch):
    """It always was (``progress or show_progress_bar``): under a pipe, lines on stderr, as ``progress=True``."""
    monkeypatch.setenv("SIAMESE_PROGRESS_SECONDS", "0.01")
    texts = [f"{t} number {i}" for i in range(64) for t in TEXTS]
    for keywords, shown in (({"show_progress_bar": True}, True), ({"progress": True}, True), ({}, False)):
        capsys.readouterr()
        minilm.encode(texts, batch_size=8, **keywords)
        err = capsys.readouterr().err
        assert ("encode: 256/256 texts (100%)" in err) is shown, (keywords, err)
