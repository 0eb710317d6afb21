"""What the Python API takes as labelled pairs (``siamese.data.pairs.as_pairs``): ``Pairs``, a pair file's path,
or ``(text1, text2, label)`` rows, in ``learn``, ``train``, ``evaluate`` and ``from_pretrained`` alike. A path
or a list of tuples used to fail deep inside with ``AttributeError: 'str' object has no attribute 'source'``."""

from __future__ import annotations

import csv

import numpy as np
import pytest

import siamese
from siamese import DataError, TrainConfig, datasets, read_pairs
from siamese.data.pairs import as_pairs


def _rows(pairs, n):
    return [(pairs.text1[i], pairs.text2[i], int(pairs.labels[i])) for i in range(n)]


def test_a_path_and_rows_give_the_pairs_the_file_holds(data_dir):
    path = data_dir / "msrp" / "msr-para-val.tsv"
    read = read_pairs(path)
    from_path = as_pairs(path)
    assert from_path.text1 == read.text1 and np.array_equal(from_path.labels, read.labels)
    assert as_pairs(str(path)).text2 == read.text2
    rows = as_pairs(_rows(read, 50) + [(read.text1[50], read.text2[50], bool(read.labels[50]))], "mine")
    assert rows.text1 == read.text1[:51] and rows.labels.tolist() == read.labels[:51].tolist()
    assert rows.labels.dtype == np.int8 and rows.source == "mine"
    assert as_pairs(read) is read


@pytest.mark.parametrize(
    "value, error, message",
    [
        ([("a", "b", 2)], DataError, "labels: row 0: expected (text1, text2, label) with label 0/1, true/false or yes"),
        ([("a", "b", 1), ("a", "b")], DataError, "labels: row 1: expected (text1, text2, label)"),
        ([("a", None, 1)], DataError, "labels: row 0"),
        ([("a", "b", "maybe")], DataError, "labels: row 0"),
        (42, TypeError, "labels: expected siamese.Pairs (siamese.read_pairs), a pair file's path, (text1, text2"),
        ({"text1": ["a"]}, DataError, "labels: a table needs two text columns and a label column"),
        ({"text1": ["a"], "text2": ["b"], "label": [0.5]}, DataError, "labels: row 0: expected texts in 'text1'"),
    ],
)
def test_anything_else_is_one_line_naming_what_is_accepted(value, error, message):
    with pytest.raises(error) as e:
        siamese.learn(value)  # refused before any model is loaded
    assert message in str(e.value) and "\n" not in str(e.value)


def test_tables_and_input_examples_as_sentence_transformers_users_hold_them(data_dir):
    """A pandas DataFrame, a dict of columns (a Hugging Face Dataset reads the same way) or InputExamples."""
    import pandas as pd
    from sentence_transformers import InputExample

    read = read_pairs(data_dir / "msrp" / "msr-para-val.tsv").subset(range(40))
    columns = {"sentence1": read.text1, "sentence2": read.text2, "label": read.labels.tolist()}
    frame = pd.DataFrame({"question1": read.text1, "question2": read.text2, "is_duplicate": read.labels})
    examples = [InputExample(texts=[a, b], label=int(y)) for a, b, y in zip(read.text1, read.text2, read.labels)]
    for value in (columns, frame, examples):
        got = as_pairs(value)
        assert got.text1 == read.text1 and got.text2 == read.text2 and got.labels.tolist() == read.labels.tolist()
    # labels as a pair file writes them, in a table read as text (dtype=str) or typed by hand: as read_pairs reads them
    said = frame.assign(is_duplicate=[["no", "Yes", "0", "1", "true"][i % 5] for i in range(40)])
    assert as_pairs(said).labels.tolist() == [[0, 1, 0, 1, 1][i % 5] for i in range(40)]
    assert as_pairs([("a", "b", "yes"), ("c", "d", "0")]).labels.tolist() == [1, 0]
    with pytest.raises(DataError, match="row 3: expected texts in 'question1'"):
        as_pairs(frame.assign(is_duplicate=[0.5 if i == 3 else 1 for i in range(40)]))
    missing = frame.assign(is_duplicate=pd.array([1] * 39 + [None], dtype="Int64"))  # pandas' NA is no label
    with pytest.raises(DataError, match="row 39: expected texts"):
        as_pairs(missing)
    with pytest.raises(TypeError, match="read_pairs reads a pair file, not a DataFrame"):
        read_pairs(frame)


def test_learn_reads_a_label_file_by_its_path(tmp_path):
    """The path is read as a file (its name in the message) and checked as labels before any model loads."""
    path = tmp_path / "labels.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f).writerows([("text1", "text2", "label")] + [(f"q{i}", f"p{i}", int(i < 3)) for i in range(10)])
    with pytest.raises(DataError, match="labels.csv: 10 labelled pairs \\(3 duplicates, 7 not\\)"):
        siamese.learn(path)


def test_train_evaluate_and_from_pretrained_take_paths_and_rows(data_dir, tmp_path):
    lines = (data_dir / "msrp" / "msr-para-val.tsv").read_text(encoding="utf-8-sig").splitlines()
    val_path = tmp_path / "val.tsv"  # MSRP's validation file cut to 120 pairs, its format as it is
    val_path.write_text("\n".join(lines[:121]) + "\n", encoding="utf-8")
    val = read_pairs(val_path)
    assert len(val) == 120 and 0 < val.labels.sum() < 120
    train_rows = _rows(datasets.load("msrp-train", data_dir), 400)
    bow = siamese.ModelConfig(encoder="bow")
    model = siamese.train(train_rows, val_path, model_config=bow, config=TrainConfig(epochs=1), progress=False)
    by_path = siamese.evaluate(model, val_path)
    by_rows = siamese.evaluate(model, _rows(val, len(val)))
    assert by_path["n"] == by_rows["n"] == 120 and 0.4 < by_path["accuracy"] <= 1.0
    assert (by_path["accuracy"], by_path["roc_auc"]) == pytest.approx((by_rows["accuracy"], by_rows["roc_auc"]))
    assert by_path["calibrated"]  # the validation file, given by its path, chose the threshold and calibration

    minilm = siamese.from_pretrained("minilm", val_path)
    same = siamese.from_pretrained("minilm", _rows(val, len(val)))
    assert minilm.threshold == pytest.approx(same.threshold) and minilm.threshold != 0.5
    assert minilm.info["pretrained"]["threshold_choice"]["val_pairs"] == 120
