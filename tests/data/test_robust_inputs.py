"""Malformed input files stop with ``file:line: what`` (exit 2) instead of silently giving wrong
data: unbalanced quotes, rows of the wrong width, repeated header names, a delimiter that does not
match the extension, UTF-16, and OS errors on inputs and outputs."""

from __future__ import annotations

import codecs
import os
from pathlib import Path

import numpy as np
import pytest
from conftest import assert_user_error, run, run_json

from siamese import read_pairs, read_texts
from siamese.data.answers import read_trecqa
from siamese.distill import read_corpus
from siamese.emoji.tweets import read_tweets
from siamese.errors import DataError, OutputError


@pytest.fixture
def quora(data_dir) -> list[str]:
    return (data_dir / "quora/quora_question_pairs_sample300.csv").read_text(encoding="utf-8").splitlines(keepends=True)


def write(path: Path, lines: list[str], encoding: str = "utf-8") -> Path:
    path.write_text("".join(lines), encoding=encoding, newline="")
    return path


def open_quote(line: str, field: int = 3) -> str:
    """The line with a quote opened at the start of one field and never closed (or one quote removed)."""
    if '"' in line:
        i = line.index('"')
        return line[:i] + line[i + 1 :]
    parts = line.split(",")
    parts[field] = '"' + parts[field]
    return ",".join(parts)


@pytest.mark.parametrize("line", [30, 70, 123, 199, 295])
def test_unbalanced_quote_is_an_error_naming_the_line(tmp_path, quora, line):
    lines = list(quora)
    lines[line - 1] = open_quote(lines[line - 1])
    with pytest.raises(DataError, match=rf"bad.csv:{line}: unbalanced quote"):
        read_pairs(write(tmp_path / "bad.csv", lines))


def test_unbalanced_quote_that_keeps_the_row_width_is_still_caught(tmp_path):
    # the quoted field swallows the next line and ends right before a comma: 3 fields, as the header
    bad = write(
        tmp_path / "bad.csv",
        ["text1,text2,label\n", '"How do I learn Python?,What is Python\n', 'really",1\n', "a,b,0\n"],
    )
    with pytest.raises(DataError, match="bad.csv:2: unbalanced quote"):
        read_pairs(bad)
    # a properly quoted field over two lines is valid CSV
    good = write(
        tmp_path / "good.csv", ["text1,text2,label\n", '"How do I learn\nPython?",What is Python,1\n', "a,b,0\n"]
    )
    assert read_pairs(good).text1[0] == "How do I learn\nPython?"


def test_cli_evaluate_stops_on_an_unbalanced_quote(tmp_path, quora, model_path):
    lines = list(quora)
    lines[122] = open_quote(lines[122])
    bad = write(tmp_path / "bad.csv", lines)
    assert_user_error(run("evaluate", model_path, "--data", bad, check_ok=False), "bad.csv:123: unbalanced quote")


def test_index_texts_with_an_unbalanced_quote_are_refused(tmp_path, quora, model_path):
    # the 600 questions of the sample as one column; one quote opened and never closed
    lines = ["question\n"] + [f'"{q.strip()}"\n' for row in quora[1:] for q in row.split(",")[3:5] if '"' not in q]
    lines[10] = lines[10][1:]  # the closing quote only: a stray quote inside an unquoted field is fine ...
    lines[20] = '"' + lines[20].strip().strip('"') + "\n"  # ... an opening one that never closes is not
    texts = write(tmp_path / "questions.csv", lines)
    with pytest.raises(DataError, match="questions.csv:21: unbalanced quote"):
        read_texts(texts)
    assert_user_error(
        run("index", "build", model_path, "--data", texts, "--out", tmp_path / "idx", check_ok=False),
        "questions.csv:21",
    )
    assert not (tmp_path / "idx").exists()


def test_row_with_the_wrong_number_of_fields(tmp_path, quora):
    lines = list(quora)
    lines[41] = lines[41].rstrip("\n") + ",extra\n"
    with pytest.raises(DataError, match="bad.csv:42: expected 6 fields, found 7"):
        read_pairs(write(tmp_path / "bad.csv", lines))
    lines = list(quora)
    lines[41] = ",".join(lines[41].split(",")[:5]) + "\n"
    with pytest.raises(DataError, match="bad.csv:42: expected 6 fields, found 5"):
        read_pairs(write(tmp_path / "bad.csv", lines))


def test_duplicate_header_name(tmp_path, quora):
    lines = list(quora)
    lines[0] = "id,qid1,qid2,question1,question1,is_duplicate\n"
    with pytest.raises(DataError, match="bad.csv:1: column 'question1' appears twice"):
        read_pairs(write(tmp_path / "bad.csv", lines), text1="question1", text2="question2", label="is_duplicate")
    texts = write(tmp_path / "texts.csv", ["question,question\n", "a,b\n"])
    with pytest.raises(DataError, match="appears twice"):
        read_texts(texts)
    # no format given: named so, not "cannot tell the format from the first line"
    with pytest.raises(DataError, match="rep.csv:1: column 'text1' appears twice in the header"):
        read_pairs(write(tmp_path / "rep.csv", ["text1,text2,text1\n", "a,b,c\n"]))


PAIRS = [
    ("How do I bake bread?", "How to bake bread at home?", "1"),
    ("Is it raining, or not?", 'What is "rain" made of?', "0"),
    ("Where is my order", "Track my order", "1"),
]


def table(path: Path, rows: list[tuple[str, ...]], delimiter: str) -> Path:
    import csv

    with open(path, "w", newline="", encoding="utf-8") as f:
        csv.writer(f, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return path


def test_tsv_content_in_a_csv_is_read_tab_separated_by_every_reader(tmp_path):
    """A .csv whose header line has tabs and no comma is a TSV saved as .csv (no comma-separated header is one name
    holding tabs): the pair and text readers read it tab-separated, as they read a .tsv."""
    header = [("text1", "text2", "label")]
    tabs = table(tmp_path / "tabs_named.csv", header + PAIRS, "\t")
    commas = table(tmp_path / "commas.csv", header + PAIRS, ",")
    expected = read_pairs(commas)
    assert expected.text1[1] == "Is it raining, or not?" and expected.labels.tolist() == [1, 0, 1]
    for fmt in ("auto", "generic"):
        pairs = read_pairs(tabs, fmt)
        assert (pairs.text1, pairs.text2, pairs.labels.tolist()) == (expected.text1, expected.text2, [1, 0, 1])
    assert read_pairs(tabs, delimiter="\t").text2 == expected.text2  # Python's delimiter= is kept
    assert read_texts(tabs, "text2") == expected.text2
    quora = table(tmp_path / "quora.csv", [("id", "qid1", "qid2", "question1", "question2", "is_duplicate")]
                  + [(str(i), "1", "2", *row) for i, row in enumerate(PAIRS)], "\t")  # fmt: skip
    assert read_pairs(quora, "quora").text1 == read_pairs(quora).text1 == expected.text1
    trec = table(
        tmp_path / "trec.csv", [("qtext", "label", "atext"), ("q one", "1", "a one"), ("q one", "0", "b")], "\t"
    )
    assert [(q.text, q.labels.tolist()) for q in read_trecqa(trec)] == [
        ("q one", [1, 0])
    ]  # the other readers choose alike


def test_a_tab_inside_a_csvs_quoted_text_keeps_it_a_csv(tmp_path):
    path = write(tmp_path / "quoted.csv", ["text1,text2,label\n", '"a\tb","tab\tinside, and a comma",1\n', "c,d,0\n"])
    pairs = read_pairs(path)
    assert pairs.text1 == ["a\tb", "c"] and pairs.text2 == ["tab\tinside, and a comma", "d"]
    assert read_texts(path, "text2") == ["tab\tinside, and a comma", "d"]
    one_column = write(tmp_path / "texts.csv", ["text\n", "a\ttab in a text\n", '"quoted\ttab"\n'])  # no tab above
    assert read_texts(one_column) == ["a\ttab in a text", "quoted\ttab"]
    header_tab = write(tmp_path / "mixed.csv", ['"text\t1",text2,label\n', "a\tb,c,1\n"])  # its commas decide
    assert read_pairs(header_tab, text1="text\t1").text1 == ["a\tb"]


def test_a_delimiter_that_cannot_be_right_says_only_what_works(tmp_path):
    header = [("text1", "text2", "label")]
    csv_in_tsv = table(tmp_path / "other.tsv", header + PAIRS, ",")
    for fmt in ("auto", "generic", "quora"):
        with pytest.raises(DataError) as e:
            read_pairs(csv_in_tsv, fmt)
        assert str(e.value) == (
            f"{csv_in_tsv}:1: the first line is comma-separated, but a .tsv file is read tab-separated (rename it .csv)"
        )
    with pytest.raises(DataError, match="rename it .csv"):
        read_texts(csv_in_tsv, "text1")
    assert len(read_pairs(csv_in_tsv.rename(tmp_path / "other.csv"))) == 3  # and so it reads
    paws = table(tmp_path / "paws.csv", [("id", "sentence1", "sentence2", "label"), ("1", "a", "b", "1")], ",")
    with pytest.raises(DataError) as e:
        read_pairs(paws, "paws")  # PAWS's own files are tab-separated
    assert str(e.value) == (
        f"{paws}:1: the first line is comma-separated, but this file is read tab-separated (format 'paws' reads its "
        "corpus's tab-separated files; for this one pass --format generic with --text1/--text2/--label naming its "
        "columns)"
    )
    assert read_pairs(paws, "generic", text1="sentence1", text2="sentence2").text1 == ["a"]
    tabs = table(tmp_path / "tabs.csv", header + PAIRS, "\t")
    with pytest.raises(DataError, match="tabs.csv:1: the first line is tab-separated, but this file is read comma-"):
        read_pairs(tabs, delimiter=",")  # given in Python: kept, and said so
    semi = write(tmp_path / "semi.csv", ["text1;text2;label\n", "a;b;1\n"])
    with pytest.raises(DataError, match="semicolon-separated"):
        read_pairs(semi)


def test_every_command_reads_a_tab_separated_csv_alike(tmp_path):
    """evaluate, score, train and the text commands (encode, dedupe) read a .csv of tabs as they read its .tsv twin
    (the trial's `error: tabs_named.csv:1: ... (rename it .tsv or pass --format)`, which no --format helped)."""
    from siamese import ModelConfig, SiameseModel

    texts = [t for row in PAIRS for t in row[:2]]
    model = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=16, seed=0)).save(tmp_path / "m")
    tabs = table(tmp_path / "tabs_named.csv", [("text1", "text2", "label"), *PAIRS], "\t")
    twin = table(tmp_path / "twin.tsv", [("text1", "text2", "label"), *PAIRS], "\t")
    expected = run_json("evaluate", model, "--data", twin)
    for fmt in ("auto", "generic"):
        assert run_json("evaluate", model, "--data", tabs, "--format", fmt) == expected
    run("score", model, "--data", tabs, "--out", tmp_path / "scored.csv")
    scored = (tmp_path / "scored.csv").read_text().splitlines()
    assert scored[0].startswith("text1,text2,label,similarity") and len(scored) == 4  # written as a .csv: commas
    run("encode", model, "--data", tabs, "--column", "text1", "--out", tmp_path / "v.npy", "--quiet")
    assert np.load(tmp_path / "v.npy").shape == (3, 16)
    assert run_json("dedupe", model, "--data", tabs, "--column", "text2", "--out", tmp_path / "run")["texts"] == 3


def test_utf16_with_a_bom_is_read_and_without_one_refused(tmp_path, quora):
    expected = read_pairs(write(tmp_path / "utf8.csv", quora))
    for encoding in ("utf-16", "utf-16-be", "utf-32"):
        path = tmp_path / f"{encoding}.csv"
        data = "".join(quora).encode(encoding)
        if not data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE, codecs.BOM_UTF32_LE)):
            data = codecs.BOM_UTF16_BE + data
        path.write_bytes(data)
        pairs = read_pairs(path)
        assert pairs.text1 == expected.text1 and list(pairs.labels) == list(expected.labels)
    (tmp_path / "nobom.csv").write_bytes("".join(quora).encode("utf-16-le"))
    with pytest.raises(DataError, match="nobom.csv:1: holds NUL bytes.*UTF-16 without a byte-order mark"):
        read_pairs(tmp_path / "nobom.csv", format="quora")
    (tmp_path / "lines.txt").write_bytes("first question\nsecond question\n".encode("utf-16"))
    assert read_texts(tmp_path / "lines.txt") == ["first question", "second question"]


def test_other_readers_check_their_csv_too(tmp_path, data_dir):
    trec = (data_dir / "trecqa/train.csv").read_text(encoding="utf-8").splitlines(keepends=True)[:50]
    lines = list(trec)
    lines[0] = "qtext,label,qtext\n"
    with pytest.raises(DataError, match="appears twice"):
        read_trecqa(write(tmp_path / "trec.csv", lines))
    lines = list(trec)
    lines[9] = lines[9].rstrip("\n") + ",x\n"
    with pytest.raises(DataError, match="trec.csv:10: expected 3 fields"):
        read_trecqa(write(tmp_path / "trec.csv", lines))
    tweets = (data_dir / "airline_tweets/Tweets_12000.csv").read_text(encoding="utf-8").splitlines(keepends=True)[:40]
    header = tweets[0].split(",")
    tweets[0] = ",".join(header[:2] + [header[1]] + header[3:])
    with pytest.raises(DataError, match="appears twice"):
        read_tweets(write(tmp_path / "tweets.csv", tweets))
    corpus = write(tmp_path / "corpus.csv", ["text\n", '"one text\n', "two\n"])
    with pytest.raises(DataError, match="corpus.csv:2: unbalanced quote"):
        read_corpus([corpus], column="text")


def test_os_errors_on_inputs_are_one_line(tmp_path, model_path):
    (tmp_path / "folder.csv").mkdir()
    with pytest.raises(DataError, match="folder.csv: is a folder"):
        read_pairs(tmp_path / "folder.csv", format="generic")
    assert_user_error(run("evaluate", model_path, "--data", tmp_path / "folder.csv", check_ok=False), "is a folder")
    assert_user_error(
        run("encode", model_path, "--data", tmp_path / "folder.csv", "--out", tmp_path / "v.npy", check_ok=False),
        "is a folder",
    )
    if os.geteuid() != 0:  # root reads anything
        secret = tmp_path / "secret.txt"
        secret.write_text("a question\n")
        secret.chmod(0)
        assert_user_error(
            run("encode", model_path, "--data", secret, "--out", tmp_path / "v.npy", check_ok=False),
            "secret.txt",
            "Permission denied",
        )


def test_os_errors_on_outputs_are_one_line(tmp_path, model_path):
    texts = tmp_path / "texts.txt"
    texts.write_text("one question\nanother one\n")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert_user_error(
        run("encode", model_path, "--data", texts, "--out", blocker / "v.npy", "--quiet", check_ok=False), str(blocker)
    )
    assert_user_error(
        run("index", "build", model_path, "--data", texts, "--out", blocker / "idx", check_ok=False), str(blocker)
    )
    (tmp_path / "dir.npy").mkdir()
    assert_user_error(
        run("encode", model_path, "--data", texts, "--out", tmp_path / "dir.npy", "--quiet", check_ok=False),
        "is a folder",
    )
    with pytest.raises(OutputError, match="a folder is there"):
        from siamese.io.atomic import atomic_file

        with atomic_file(tmp_path / "dir.npy"):
            pass


# -- nothing of the user's is replaced ------------------------------------------------------------


def test_output_files_never_replace_an_input_or_an_existing_file(tmp_path, model_path, data_dir):
    """encode, evaluate --report/--errors, summary --png and score write a new file: an existing one
    is replaced only with --overwrite, and never when it is the command's input (or the model's config)."""
    texts = tmp_path / "texts.txt"
    texts.write_text("one question\nanother one\n")
    pairs = tmp_path / "pairs.csv"
    pairs.write_bytes((data_dir / "quora/quora_question_pairs_sample300.csv").read_bytes())
    config = Path(model_path) / "config.json"
    before = {p: p.read_bytes() for p in (texts, pairs, config)}
    for args, fragment in [
        (("encode", model_path, "--data", texts, "--out", texts, "--quiet"), "is this command's input"),
        (
            ("encode", model_path, "--data", texts, "--out", config, "--quiet", "--overwrite"),
            "which this command reads",
        ),
        (("evaluate", model_path, "--data", pairs, "--errors", pairs, "--overwrite"), "is this command's input"),
        (
            ("evaluate", model_path, "--data", pairs, "--report", tmp_path / "x.html", "--errors", tmp_path / "x.html"),
            "give each its own file",
        ),
        (("summary", model_path, "--png", config), "which this command reads"),
        (("score", model_path, "--data", pairs, "--out", texts), "a file is already there"),
        (("score", model_path, "--data", pairs, "--out", texts / "scored.csv"), "is a file, not a folder"),
    ]:
        assert_user_error(run(*args, check_ok=False), fragment)
    assert {p: p.read_bytes() for p in before} == before
    out = tmp_path / "v.npy"
    run("encode", model_path, "--data", texts, "--out", out, "--quiet")
    first = out.read_bytes()
    assert_user_error(
        run("encode", model_path, "--data", texts, "--out", out, "--quiet", check_ok=False),
        "a file is already there",
        "--overwrite",
    )
    run("encode", model_path, "--data", texts, "--out", out, "--quiet", "--overwrite")
    assert out.read_bytes() == first  # replaced, with the same vectors


def test_output_folders_never_replace_another_kind_or_the_users_files(tmp_path, model_path):
    """A model, an index and a dedupe run replace only a siamese folder of their own kind, holding
    nothing siamese did not write, and never the folder the command reads."""
    import shutil

    texts = tmp_path / "texts.txt"
    texts.write_text("how do I cook rice\nwhat is a policy\nhow to boil rice\n")
    model = tmp_path / "model"
    shutil.copytree(model_path, model)
    index = tmp_path / "index"
    run("index", "build", model, "--data", texts, "--out", index, "--quiet")
    saved = {p.name: p.read_bytes() for p in model.iterdir()}
    for args, fragment in [
        (("dedupe", model, "--data", texts, "--out", model), "is the folder this command reads"),
        (("index", "build", model, "--data", texts, "--out", model), "is the folder this command reads"),
        (("export", model, "--out", model), "is the folder this command reads"),
    ]:
        assert_user_error(run(*args, check_ok=False), fragment)
    assert {p.name: p.read_bytes() for p in model.iterdir()} == saved
    (index / "NOTES.md").write_text("mine")
    assert_user_error(
        run("index", "build", model, "--data", texts, "--out", index, "--quiet", check_ok=False),
        "files siamese did not write (NOTES.md)",
    )
    assert (index / "NOTES.md").read_text() == "mine"
    run("index", "build", model, "--data", texts, "--out", index, "--quiet", "--overwrite")  # the user's consent
    assert not (index / "NOTES.md").exists()


def test_text_arguments_and_thresholds_are_checked(model_path):
    assert_user_error(run("predict", model_path, "\udcff bytes", "hello", check_ok=False), "text1: not valid UTF-8")
    assert_user_error(run("predict", model_path, "hello", "  ", check_ok=False), "text2: the text is empty")
    # outside [-1, 1] a run calls nothing or everything a duplicate (a dedupe folder its readers then refuse)
    for value in ("nan", "5", "-3", "90"):
        proc = run("predict", model_path, "a", "b", "--threshold", value, check_ok=False)
        said = " ".join((proc.stderr + proc.stdout).split())
        assert proc.returncode == 2 and "must be a number in [-1, 1]" in said and "Traceback" not in said, said
        assert proc.stdout == ""


def test_a_threshold_is_a_number_in_minus_one_to_one():
    from siamese.decision.threshold import check_threshold
    from siamese.errors import ConfigError

    assert check_threshold(-1) == -1.0 and check_threshold(0.9) == 0.9 and check_threshold(1) == 1.0
    for value, said in ((1.5, "got 1.5"), (float("nan"), "got nan"), (-1.01, "got -1.01"), (90, "90 % is 0.9")):
        with pytest.raises(ConfigError, match="must be a number in \\[-1, 1\\]") as e:
            check_threshold(value)
        assert said in str(e.value)
    with pytest.raises(ConfigError) as e:
        check_threshold(5)
    assert "percentage" not in str(e.value)  # 5 % is no likelier than a slip


def test_a_folder_with_pickled_weights_only_is_refused_unread(tmp_path):
    """pytorch_model.bin is a pickle: refused before anything opens it, whatever it holds."""
    from siamese.models.pretrained import model_folder

    folder = tmp_path / "hf"
    folder.mkdir()
    for name in ("config.json", "tokenizer.json"):
        (folder / name).write_bytes((model_folder("minilm") / name).read_bytes())
    (folder / "pytorch_model.bin").write_bytes(b"not even a pickle: it must not be opened")
    assert_user_error(
        run("pretrained", folder, "--out", tmp_path / "out", check_ok=False),
        "pytorch_model.bin",
        "never loads pickled weights",
    )
    assert not (tmp_path / "out").exists()
