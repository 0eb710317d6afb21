"""A help-desk CSV as a newcomer brings it (found by a newcomer's trial): a DataFrame to siamese.dedupe, ids kept
by `index add`, empty texts said to be skipped, and the index and its searches refusing what they cannot take."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from conftest import assert_user_error, run, run_json

import siamese
from siamese.errors import ConfigError, DataError
from siamese.search import DuplicateIndex

QUESTIONS = [
    "How do I cancel my car insurance?",
    "How can I cancel my car insurance policy?",
    "Is life insurance taxable?",
    "What does renters insurance cover?",
    "How do I cancel my car insurance?",
]


@pytest.fixture(scope="module")
def desk(tmp_path_factory):
    """A CSV with ids, a category and two rows without a question."""
    folder = tmp_path_factory.mktemp("desk")
    rows = [("Q100", "auto", QUESTIONS[0]), ("Q101", "auto", QUESTIONS[1]), ("Q102", "life", "")]
    rows += [("Q103", "life", QUESTIONS[2]), ("Q104", "home", "  "), ("Q105", "home", QUESTIONS[3])]
    path = folder / "q.csv"
    path.write_text("id,category,question\n" + "".join(f"{i},{c},{q}\n" for i, c, q in rows))
    return path


def test_a_dataframe_is_deduplicated_by_its_text_column_with_its_ids(trained):
    frame = pd.DataFrame({"id": ["a", "b", "c", "d", "e"], "category": ["x"] * 5, "question": QUESTIONS})
    found = siamese.dedupe(frame, trained.model, threshold=0.95, id_column="id")
    # was: the column names de-duplicated (kept=['id', 'question'], no cluster)
    assert found.kept[:4] == QUESTIONS[:4] and QUESTIONS[4] in found.kept[:4]
    cluster = next(c for c in found.clusters if c.kept.text == QUESTIONS[0])
    assert cluster.kept.id == "a" and "e" in [d.record.id for d in cluster.duplicates]
    assert cluster.kept.columns == {"category": "x"}
    by_position = siamese.dedupe(frame[["question"]], trained.model, threshold=0.95)
    assert next(c for c in by_position.clusters if c.kept.text == QUESTIONS[0]).kept.id == "0"
    with pytest.raises(DataError, match="which column holds the texts, question or title"):
        siamese.dedupe(frame.assign(title=QUESTIONS), trained.model)
    with pytest.raises(DataError, match="no id column 'qid'"):
        siamese.dedupe(frame, trained.model, id_column="qid")
    with pytest.raises(DataError, match="row 1: id 'a' repeats row 0"):
        siamese.dedupe(frame.assign(id=["a", "a", "c", "d", "e"]), trained.model, id_column="id")
    with pytest.raises(TypeError, match="its order is not defined|got set"):
        siamese.dedupe(set(QUESTIONS), trained.model)


def test_encode_of_a_table_or_a_set_says_what_to_pass(trained):
    with pytest.raises(TypeError, match=r"got a table \(DataFrame, columns: q\): pass df\['q'\]"):
        trained.model.encode(pd.DataFrame({"q": QUESTIONS}))  # was: one vector, of the word "q"
    with pytest.raises(TypeError, match="a set"):
        trained.model.encode(set(QUESTIONS))
    assert trained.model.encode(pd.Series(QUESTIONS)).shape[0] == len(QUESTIONS)  # a column is a list of texts
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="batch_size must be a whole number >= 1"):
            trained.model.encode(QUESTIONS, batch_size=bad)
    assert trained.model.encode(QUESTIONS, batch_size=np.int64(2)).shape == (len(QUESTIONS), trained.model.dim)
    with pytest.raises(ConfigError, match="must be a number in"):
        siamese.dedupe(QUESTIONS, trained.model, threshold="0.9")


def test_a_missing_file_or_a_folder_is_named_as_such(trained, tmp_path):
    with pytest.raises(DataError, match="missing.csv: no such file"):
        siamese.dedupe(str(tmp_path / "missing.csv"), trained.model)
    with pytest.raises(DataError, match="is a folder"):
        siamese.dedupe(tmp_path, trained.model)
    with pytest.raises(TypeError, match="not one text"):  # a question passed alone is no path
        siamese.dedupe("How do I cancel my car insurance?", trained.model)


def test_empty_texts_are_said_to_be_skipped_and_ids_must_be_given(model_path, desk, tmp_path):
    ran = run("dedupe", model_path, "--data", desk, "--id-column", "id", "--out", tmp_path / "run")
    assert f"skipped 2 empty texts ({desk} rows 3, 5)" in ran.stdout + ran.stderr
    built = run("index", "build", model_path, "--data", desk, "--id-column", "id", "--out", tmp_path / "idx")
    assert f"skipped 2 empty texts ({desk} rows 3, 5)" in built.stdout + built.stderr
    no_id = tmp_path / "no-id.csv"
    no_id.write_text("id,question\nQ1,How do I pay?\n,Where is my refund?\n")
    assert_user_error(
        run("dedupe", model_path, "--data", no_id, "--id-column", "id", "--out", tmp_path / "x", check_ok=False),
        f"{no_id}: row 2: column 'id' is empty",
    )
    same = run("dedupe", model_path, "--data", desk, "--column", "question", "--id-column", "question", "--out",
               tmp_path / "y", check_ok=False)  # fmt: skip
    assert_user_error(same, "'question' is named as both the text column and the id column")
    empty_name = run("dedupe", model_path, "--data", desk, "--column", "", "--out", tmp_path / "z", check_ok=False)
    assert_user_error(empty_name, "the text column's name is empty")
    assert not any((tmp_path / n).exists() for n in ("x", "y", "z"))


def test_index_add_keeps_the_files_ids_and_refuses_what_it_cannot_take(model_path, desk, tmp_path):
    idx = tmp_path / "idx"
    run_json("index", "build", model_path, "--data", desk, "--id-column", "id", "--out", idx, "--quiet")
    new = tmp_path / "new.csv"
    new.write_text("id,question\nN1,Can I insure a rented flat?\nN2,Does travel insurance cover a cancelled flight?\n")
    added = run_json("index", "add", idx, "--data", new, "--id-column", "id", "--quiet")
    assert added["added"] == 2  # was: no --id-column, and the new texts got positions as ids
    hit = run_json("search", idx, "Does travel insurance cover a cancelled flight?", "-k", "1")["hits"][0]
    assert hit["id"] == "N2"
    clash = tmp_path / "clash.csv"
    clash.write_text("id,question\nQ100,Is flood damage covered by home insurance?\n")
    assert_user_error(
        run("index", "add", idx, "--data", clash, "--id-column", "id", check_ok=False),
        "id 'Q100' is in the index already",
    )
    positional = tmp_path / "more.txt"
    positional.write_text("Is earthquake damage covered?\n")
    said = run("index", "add", idx, "--data", positional)
    assert "--id-column names yours" in said.stdout + said.stderr
    # its own texts.jsonl: inside the folder it rewrites (and JSON lines are no text lines)
    before = (idx / "texts.jsonl").read_text()
    assert_user_error(run("index", "add", idx, "--data", idx / "texts.jsonl", check_ok=False), "this command reads")
    outside = tmp_path / "texts.jsonl"
    outside.write_text(before)
    assert_user_error(run("index", "add", idx, "--data", outside, check_ok=False), "a JSON file")
    assert (idx / "texts.jsonl").read_text() == before


def test_the_index_in_python_takes_a_model_folder_and_refuses_a_bad_search(model_path, desk, tmp_path):
    run_json("index", "build", model_path, "--data", desk, "--id-column", "id", "--out", tmp_path / "idx", "--quiet")
    index = DuplicateIndex.load(tmp_path / "idx", str(model_path))  # was: 'str' object has no attribute 'encoder'
    assert index.search(QUESTIONS[0], 1)[0][0].id == "Q100"
    for k in (0, -2, 1.5, True):
        with pytest.raises(ConfigError, match="k must be a whole number >= 1"):  # was: a bare AssertionError
            index.search([QUESTIONS[0]], k=k)
    with pytest.raises(DataError, match="item 1 is empty"):
        index.search([QUESTIONS[0], "  "])


def test_a_dedupe_folder_holding_other_files_is_not_offered_overwrite(model_path, desk, tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    message = assert_user_error(run("dedupe", model_path, "--data", desk, "--out", mine, check_ok=False), "notes.txt")
    assert "--overwrite" not in message  # dedupe has no such option
    assert json.loads(json.dumps((mine / "notes.txt").read_text())) == "mine"
