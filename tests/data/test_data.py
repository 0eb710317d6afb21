"""Pair readers on the shared public data sets (counts from DATA.md) and on small bad files."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from siamese import DataError, Pairs, datasets, read_pairs, read_texts, split_pairs
from siamese.data.input_files import first_line
from siamese.data.pairs import FORMATS, detect_format
from siamese.data.records import read_records

# Rows and positives (label 1) per catalogue name, as documented in shared/data/DATA.md.
# None: DATA.md gives no positive count (graded sets; checked against an independent read below).
DOCUMENTED = {
    "quora-sample": (300, 113),
    "msrp-train": (3576, 2407),
    "msrp-val": (500, 346),
    "msrp-test": (1725, 1147),
    "paws-wiki-dev": (8000, 3539),
    "paws-wiki-test": (8000, 3536),
    "paws-qqp-train": (11988, 3776),
    "paws-qqp-dev-test": (677, 191),
    "twitter-url-train": (42200, 11167),
    "twitter-url-test": (9324, 1820),
    "sts-train": (5749, None),
    "sts-dev": (1500, None),
    "sts-test": (1379, None),
    "sick-train": (4500, None),
    "sick-trial": (500, None),
    "sick-test": (4927, None),
    # SemEval-2016 3B: train_part1 1,999 (181 PerfectMatch + 606 Relevant) + train_part2 670 (54 + 242);
    # dev 500 (59 + 155).
    "semeval-train": (1999 + 670, 181 + 606 + 54 + 242),
    "semeval-dev": (500, 59 + 155),
    "mqp": (3048, 1524),
    "parasci-acl-train": (28883, 28883),  # positives only
    "parasci-acl-val": (2753, 2753),
    "insuranceqa-pairs": (526, 526),  # same-answer pairs, all positive
}


def test_documented_table_covers_the_catalogue():
    assert set(DOCUMENTED) == set(datasets.CATALOGUE)


@pytest.mark.parametrize("name", sorted(DOCUMENTED))
def test_catalogue_set_loads_with_documented_counts(data_dir, name):
    pairs = datasets.load(name, data_dir)
    rows, positives = DOCUMENTED[name]
    assert len(pairs) == rows
    assert len(pairs.text1) == len(pairs.text2) == len(pairs.labels) == rows
    assert pairs.labels.dtype == np.int8
    assert set(np.unique(pairs.labels).tolist()) <= {0, 1}
    if positives is not None:
        assert int(pairs.labels.sum()) == positives
    assert all(t.strip() for t in pairs.text1) and all(t.strip() for t in pairs.text2)
    assert pairs.source == name


def _independent_graded_read(path: Path, header: bool, score_col: int, width: int) -> np.ndarray:
    """Scores read the way DATA.md says to read the file (csv.QUOTE_NONE, first fields only)."""
    with open(path, encoding="utf-8", newline="") as f:
        rows = [r[:width] for r in csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if r]
    return np.array([float(r[score_col]) for r in rows[1 if header else 0 :]], dtype=np.float32)


@pytest.mark.parametrize(
    "name, header, score_col, width, lo, hi",
    [
        ("sts-train", False, 4, 7, 0, 5),
        ("sts-test", False, 4, 7, 0, 5),
        ("sick-train", True, 3, 5, 1, 5),
        ("sick-test", True, 3, 5, 1, 5),
    ],
)
def test_graded_sets_keep_scores_and_threshold_them_at_4(data_dir, name, header, score_col, width, lo, hi):
    pairs = datasets.load(name, data_dir)
    gold = _independent_graded_read(data_dir / datasets.CATALOGUE[name][0], header, score_col, width)
    assert pairs.scores is not None and pairs.scores.dtype == np.float32
    np.testing.assert_array_equal(pairs.scores, gold)
    assert lo <= pairs.scores.min() and pairs.scores.max() <= hi
    np.testing.assert_array_equal(pairs.labels, (gold >= 4.0).astype(np.int8))
    assert 0 < pairs.labels.sum() < len(pairs)


def test_semeval_splits_partition_the_file(data_dir):
    whole = read_pairs(data_dir / "semeval2016_cqa/subtaskB_pairs.csv")
    train, dev = datasets.load("semeval-train", data_dir), datasets.load("semeval-dev", data_dir)
    assert len(train) + len(dev) == len(whole) == 3169
    assert int(train.labels.sum() + dev.labels.sum()) == int(whole.labels.sum()) == 1297
    assert set(train.line_numbers.tolist()).isdisjoint(dev.line_numbers.tolist())


def test_load_many_concatenates(data_dir):
    both = datasets.load_many(["msrp-val", "quora-sample"], data_dir)
    assert len(both) == 500 + 300
    assert int(both.labels.sum()) == 346 + 113
    assert both.source == "msrp-val+quora-sample" and both.scores is None


def test_graded_and_binary_sets_mix_on_the_graded_scale(data_dir):
    sts, mqp = datasets.load("sts-dev", data_dir), datasets.load("mqp", data_dir)
    both = datasets.load_many(["sts-dev", "mqp"], data_dir)
    np.testing.assert_array_equal(both.scores[: len(sts)], sts.scores)
    np.testing.assert_array_equal(
        both.scores[len(sts) :], np.where(mqp.labels == 1, sts.scores.max(), sts.scores.min())
    )
    assert sts.scores.min() == 0.0 and sts.scores.max() == 5.0


def test_unknown_name_and_missing_folder(tmp_path):
    with pytest.raises(DataError, match="unknown data set"):
        datasets.load("no-such-set", tmp_path)
    with pytest.raises(DataError, match="SIAMESE_DATA"):
        datasets.load("msrp-test", tmp_path)
    assert not datasets.available(tmp_path)


def test_data_root_honours_env(monkeypatch, tmp_path):
    monkeypatch.setenv("SIAMESE_DATA", str(tmp_path))
    assert datasets.data_root() == tmp_path.resolve()
    monkeypatch.delenv("SIAMESE_DATA")
    monkeypatch.chdir(tmp_path)
    assert datasets.data_root() == (tmp_path / ".." / "shared" / "data").resolve()


# -- format detection --------------------------------------------------------------------------

DETECTED = {
    "quora/quora_question_pairs_sample300.csv": "quora",
    "msrp/msr-para-train.tsv": "msrp",  # starts with a UTF-8 BOM
    "msrp/msr-para-test.tsv": "msrp",
    "paws/paws_wiki_dev.tsv": "paws",
    "paws/paws_qqp_train.tsv": "paws",
    "twitter_url/train.csv": "twitter-url",
    "stsbenchmark/sts-train.csv": "sts",  # no header: recognised by its 7 tab fields
    "stsbenchmark/sts-dev.csv": "sts",
    "sick/SICK_train.txt": "sick",
    "sick/SICK_test_annotated.txt": "sick",
    "semeval2016_cqa/subtaskB_pairs.csv": "semeval",
    "mqp/mqp.csv": "mqp",
    "parasci/acl_val.csv": "parasci",
}


@pytest.mark.parametrize("rel", sorted(DETECTED))
def test_detect_format_on_shared_files(data_dir, rel):
    assert detect_format(data_dir / rel).name == DETECTED[rel]


@pytest.mark.parametrize(
    "rel", ["msrp/msr-para-val.tsv", "sick/SICK_trial.txt", "mqp/mqp.csv", "stsbenchmark/sts-dev.csv"]
)
def test_auto_read_equals_catalogue_read(data_dir, rel):
    name = next(n for n, (r, _, s) in datasets.CATALOGUE.items() if r == rel and s is None)
    auto, named = read_pairs(data_dir / rel), datasets.load(name, data_dir)
    assert auto.text1 == named.text1 and auto.text2 == named.text2
    np.testing.assert_array_equal(auto.labels, named.labels)


def test_msrp_bom_and_quotes_are_read_verbatim(data_dir):
    pairs = datasets.load("msrp-train", data_dir)
    assert not pairs.text1[0].startswith("\ufeff")
    # QUOTE_NONE: sentences with a double quote keep it.
    assert any('"' in t for t in pairs.text1 + pairs.text2)


def test_undetectable_file_names_the_options(data_dir):
    with pytest.raises(DataError, match="cannot tell the format") as e:
        detect_format(data_dir / "insuranceqa/same_answer_pairs.csv")
    assert "same_answer_pairs.csv" in str(e.value) and "--format" in str(e.value)


def test_real_file_with_blank_labels_names_the_line(data_dir):
    # test_raw_cased.csv keeps the 3-of-6 vote pairs with an empty label; the first is on line 9.
    path = data_dir / "twitter_url/test_raw_cased.csv"
    with pytest.raises(DataError) as e:
        read_pairs(path)
    assert str(e.value) == f"{path}:9: column 'label': label must be 0/1, true/false or yes/no, got ''"


# -- user files ---------------------------------------------------------------------------------


def write(path: Path, text: str | bytes) -> Path:
    (path.write_bytes if isinstance(text, bytes) else path.write_text)(text)
    return path


@pytest.mark.parametrize(
    "header, delimiter, suffix",
    [
        ("text_a,text_b,label", ",", ".csv"),  # GLUE / Hugging Face
        ("id,sentence_1,sentence_2,is_duplicate", ",", ".csv"),
        ('"Question1","Question2","Label"', ",", ".csv"),
        ("sentence a\tsentence b\tparaphrase", "\t", ".tsv"),
    ],
)
def test_pair_columns_named_as_other_tools_name_them(tmp_path, header, delimiter, suffix):
    extra = "7" + delimiter if header.startswith("id,") else ""
    rows = [f"{extra}How do I bake bread?{delimiter}How to bake bread at home?{delimiter}1"]
    rows.append(f"{extra}Is it raining?{delimiter}What is rain made of?{delimiter}0")
    path = write(tmp_path / f"mine{suffix}", "\n".join([header, *rows]) + "\n")
    pairs = read_pairs(path)
    assert pairs.text1 == ["How do I bake bread?", "Is it raining?"]
    assert pairs.text2 == ["How to bake bread at home?", "What is rain made of?"]
    assert pairs.labels.tolist() == [1, 0]


@pytest.mark.parametrize(
    "header",
    [
        "text_a,text_b,note",  # no label column
        "text_a,text_b,question1,question2,label",  # two ways to read it
        "text_a,question_b,label",  # the two halves of different names
    ],
)
def test_pair_columns_that_do_not_say_which_are_refused(tmp_path, header):
    path = write(tmp_path / "mine.csv", header + "\n" + ",".join("abcde"[: header.count(",") + 1]) + "\n")
    with pytest.raises(DataError, match="cannot tell the format"):
        read_pairs(path)


def test_labels_as_pandas_writes_them(tmp_path):
    """df.to_csv writes a float label column as 1.0/0.0 and a bool one as True/False; the Python API took such a
    table, the file of it was refused."""
    path = write(tmp_path / "mine.csv", "text1,text2,label\na,b,1.0\nc,d,0.0\ne,f,True\ng,h,false\n")
    assert read_pairs(path).labels.tolist() == [1, 0, 1, 0]
    with pytest.raises(
        DataError, match="half.csv:2: column 'label': label must be 0/1, true/false or yes/no, got '0.5'"
    ):
        read_pairs(write(tmp_path / "half.csv", "text1,text2,label\na,b,0.5\n"))


def test_labels_as_a_person_writes_them(tmp_path):
    """yes/no and y/n, in any case, as a spreadsheet or a person fills a label column; a free word is refused with
    what is accepted."""
    path = write(tmp_path / "yesno.csv", "text1,text2,label\na,b,yes\nc,d,No\ne,f, Y \ng,h,n\ni,j,YES\n")
    assert read_pairs(path).labels.tolist() == [1, 0, 1, 0, 1]
    for word in ("maybe", "duplicate", "same", "2", "-1"):
        bad = write(tmp_path / "words.csv", f"text1,text2,label\na,b,yes\nc,d,{word}\n")
        with pytest.raises(DataError) as e:
            read_pairs(bad)
        assert str(e.value) == f"{bad}:3: column 'label': label must be 0/1, true/false or yes/no, got {word!r}"


def test_a_long_header_is_listed_whole_or_says_how_many_more(tmp_path):
    from siamese.data.pairs import column_list

    header = [f"c{i}" for i in range(40)]
    assert column_list(header[:15]) == ", ".join(header[:15])
    assert column_list(header).endswith("c29, ... and 10 more")
    path = write(tmp_path / "wide.csv", ",".join(header) + "\n" + ",".join("x" * 40) + "\n")
    with pytest.raises(DataError, match="no column 'txt' .*c29, ... and 10 more"):
        read_texts(path, column="txt")


def test_the_formats_command_lists_every_format_as_json_too():
    import json

    from conftest import run

    listed = json.loads(run("formats", "--json").stdout)
    assert [f["name"] for f in listed["formats"]] == list(FORMATS) and "text_a/text_b" in listed["also_detected"]
    assert "(auto)" in run("formats").stdout


def test_generic_csv_with_user_column_names(tmp_path):
    path = write(
        tmp_path / "mine.csv", 'id,title_a,title_b,same\n1,"Hello, world",Hi world,1\n2,foo,bar,0\n3,x,"y ""q""",1\n'
    )
    pairs = read_pairs(path, text1="title_a", text2="title_b", label="same")
    assert pairs.text1 == ["Hello, world", "foo", "x"]
    assert pairs.text2 == ["Hi world", "bar", 'y "q"']
    assert pairs.labels.tolist() == [1, 0, 1]
    assert pairs.line_numbers.tolist() == [2, 3, 4]
    assert pairs.scores is None


def test_generic_tsv_by_extension(tmp_path):
    path = write(tmp_path / "mine.tsv", "a\tb\ty\nfirst text\tsecond, text\t0\nthird\tfourth\t1\n")
    pairs = read_pairs(path, text1="a", text2="b", label="y")
    assert pairs.text2 == ["second, text", "fourth"]
    assert pairs.labels.tolist() == [0, 1]
    generic = write(tmp_path / "g.tsv", "text1\ttext2\tlabel\nx\ty\t1\n")
    assert read_pairs(generic, "generic").text1 == ["x"]


def test_generic_default_columns_are_autodetected(tmp_path):
    path = write(tmp_path / "g.csv", "text1,text2,label\na,b,1\nc,d,0\n")
    assert detect_format(path).name == "generic"
    assert read_pairs(path).labels.tolist() == [1, 0]


def test_override_column_of_a_detected_format(tmp_path):
    path = write(tmp_path / "q.csv", "question1,question2,is_duplicate,alt\na,b,1,z\n")
    assert read_pairs(path, text2="alt").text2 == ["z"]


def test_blank_lines_are_skipped_and_crlf_accepted(tmp_path):
    path = write(tmp_path / "g.csv", b"text1,text2,label\r\na,b,1\r\n\r\nc,d,0\r\n")
    pairs = read_pairs(path)
    assert pairs.text1 == ["a", "c"] and pairs.line_numbers.tolist() == [2, 4]


def test_unknown_format_name(tmp_path):
    path = write(tmp_path / "g.csv", "text1,text2,label\na,b,1\n")
    with pytest.raises(DataError, match="unknown format 'nope'"):
        read_pairs(path, "nope")


def test_read_texts(tmp_path):
    txt = write(tmp_path / "t.txt", "one\n\ntwo words\n")
    assert read_texts(txt) == ["one", "two words"]
    csv_file = write(tmp_path / "t.csv", "q,other\nfirst,x\n,y\nsecond,z\n")
    assert read_texts(csv_file, "q") == ["first", "second"]
    assert read_texts(csv_file, "other") == ["x", "y", "z"]
    with pytest.raises(DataError, match="no column 'missing'"):
        read_texts(csv_file, "missing")
    with pytest.raises(DataError, match="no such file"):
        read_texts(tmp_path / "absent.txt")
    bad = write(tmp_path / "bad.txt", b"fine\nbad \xff byte\n")
    with pytest.raises(DataError, match=r"bad\.txt:2: not valid UTF-8 \(byte 0xff\)"):
        read_texts(bad)


def test_a_text_column_is_found_by_its_name_never_by_position(tmp_path):
    one = write(tmp_path / "one.csv", "sentence\nfirst\nsecond\n")
    assert read_texts(one) == ["first", "second"]  # the only column
    named = write(tmp_path / "named.csv", "qid,split,Question_Text,answer_ids\n7,train,How do I pay?,3 4\n")
    assert read_texts(named) == ["How do I pay?"]
    tweets = write(tmp_path / "tweets.tsv", "tweet_id\tuser\ttext\n1\tann\tdelayed again\n")
    assert read_texts(tweets) == ["delayed again"]
    plural = write(tmp_path / "plural.csv", "id,questions\n1,What is a premium?\n")
    assert read_texts(plural) == ["What is a premium?"]
    for name, content, fragment in [
        ("pairs.csv", "question1,question2\na,b\n", "which column holds the texts, question1 or question2?"),
        ("none.csv", "a,b,c\nx,y,z\n", "no column is named like texts"),
        ("ids.csv", "question_id,score\n1,2\n", "no column is named like texts"),  # an id named like texts
        ("only_ids.csv", "qid\n1\n2\n", "no column is named like texts"),
        ("numbers.csv", "text\n12\n13\n", "column 'text' holds ids, not texts"),  # named right, holds ids
    ]:
        with pytest.raises(DataError, match="pass --column NAME") as caught:
            read_texts(write(tmp_path / name, content))
        assert fragment in str(caught.value) and "\n" not in str(caught.value)
    # named, it is used as given (ids included: the user asked for them)
    assert read_texts(write(tmp_path / "given.csv", "qid\n1\n2\n"), "qid") == ["1", "2"]


def test_the_insuranceqa_questions_are_read_from_question_not_qid(data_dir):
    questions = data_dir / "insuranceqa" / "questions.csv"
    assert first_line(questions).startswith("qid,")  # the file as shipped: ids first
    texts = read_texts(questions)
    assert len(texts) == 16889
    assert texts[0] == "What Does Medicare IME Stand For?"
    assert not any(t.isdigit() for t in texts)
    records = read_records(questions)
    assert records[1].text == "Is Long Term Care Insurance Tax Free?" and records[1].columns["qid"] == "1"
    # a pair file read as a corpus names both candidate columns instead of taking the first
    with pytest.raises(DataError, match="question1 or question2"):
        read_texts(data_dir / "insuranceqa" / "same_answer_pairs.csv")


# -- splits -------------------------------------------------------------------------------------


def test_split_pairs_stratifies_and_partitions(data_dir):
    pairs = datasets.load("msrp-train", data_dir)
    parts = split_pairs(pairs, [0.1, 0.2], seed=3)
    assert len(parts) == 3
    assert sum(len(p) for p in parts) == len(pairs)
    lines = [set(p.line_numbers.tolist()) for p in parts]
    assert set().union(*lines) == set(pairs.line_numbers.tolist())
    assert sum(len(s) for s in lines) == len(pairs)  # no pair in two parts
    pos, neg = int(pairs.labels.sum()), int((pairs.labels == 0).sum())
    for part, f in zip(parts[:2], [0.1, 0.2]):
        assert int(part.labels.sum()) == round(f * pos)
        assert int((part.labels == 0).sum()) == round(f * neg)
    rate = pairs.labels.mean()
    for part in parts:
        assert abs(part.labels.mean() - rate) < 0.01
    # rows stay aligned: each part's texts are the texts of its line numbers
    by_line = dict(zip(pairs.line_numbers.tolist(), zip(pairs.text1, pairs.text2, pairs.labels.tolist())))
    for part in parts:
        for line, a, b, y in zip(part.line_numbers.tolist(), part.text1, part.text2, part.labels.tolist()):
            assert by_line[line] == (a, b, y)


def test_split_pairs_is_seeded_and_keeps_scores(data_dir):
    pairs = datasets.load("sts-dev", data_dir)
    a1, b1 = split_pairs(pairs, [0.25], seed=7)
    a2, _ = split_pairs(pairs, [0.25], seed=7)
    a3, _ = split_pairs(pairs, [0.25], seed=8)
    assert a1.line_numbers.tolist() == a2.line_numbers.tolist()
    assert a1.line_numbers.tolist() != a3.line_numbers.tolist()
    assert a1.scores is not None and len(a1.scores) == len(a1)
    assert len(a1) + len(b1) == len(pairs)


def test_split_pairs_unstratified_sizes():
    pairs = Pairs([str(i) for i in range(10)], [str(i) for i in range(10)], np.array([1] * 9 + [0], dtype=np.int8))
    a, b = split_pairs(pairs, [0.3], stratify=False, seed=0)
    assert (len(a), len(b)) == (3, 7)
    assert sorted(a.text1 + b.text1, key=int) == pairs.text1


# -- bad input: DataError names the file, the line and the column -------------------------------

GOOD_HEADER = "text1,text2,label\n"


def test_missing_column(tmp_path):
    path = write(tmp_path / "pairs.csv", "text1,text2,lbl\na,b,1\n")
    with pytest.raises(DataError) as e:
        read_pairs(path, "generic")
    msg = str(e.value)
    assert str(path) in msg and "missing column" in msg and "'label'" in msg and "'lbl'" in msg


def test_bad_label(tmp_path):
    path = write(tmp_path / "pairs.csv", GOOD_HEADER + "a,b,1\nc,d,2\n")
    with pytest.raises(DataError) as e:
        read_pairs(path)
    assert str(e.value) == f"{path}:3: column 'label': label must be 0/1, true/false or yes/no, got '2'"


def test_empty_text(tmp_path):
    path = write(tmp_path / "pairs.csv", GOOD_HEADER + "a,b,1\nc,d,0\ne,  ,1\n")
    with pytest.raises(DataError) as e:
        read_pairs(path)
    assert str(e.value) == f"{path}:4: column 'text2' is empty"


def test_non_utf8_bytes_on_a_line(tmp_path):
    path = write(tmp_path / "pairs.csv", GOOD_HEADER.encode() + b"a,b,1\nc,d,0\ncaf\xe9 latin-1,x,1\ne,f,0\n")
    with pytest.raises(DataError) as e:
        read_pairs(path)
    assert str(e.value) == f"{path}:4: not valid UTF-8 (byte 0xe9)"


def test_short_row(tmp_path):
    path = write(tmp_path / "pairs.csv", GOOD_HEADER + "a,b,1\nonly-one-field\n")
    with pytest.raises(DataError, match=r"pairs\.csv:3: expected 3 fields, found 1"):
        read_pairs(path)


def test_non_numeric_score(tmp_path):
    path = write(tmp_path / "sts.tsv", "g\tf\ty\t1\t4.5\tone\ttwo\ng\tf\ty\t2\tfive\tthree\tfour\n")
    with pytest.raises(DataError, match=r"sts\.tsv:2: column 'score': expected a number, got 'five'"):
        read_pairs(path, "sts")


@pytest.mark.parametrize("format", ["auto", "generic"])
def test_empty_file(tmp_path, format):
    path = write(tmp_path / "pairs.csv", "")
    with pytest.raises(DataError) as e:
        read_pairs(path, format)
    assert str(e.value) == f"{path}: file is empty"


@pytest.mark.parametrize("format", ["auto", "generic"])
def test_header_only_file(tmp_path, format):
    path = write(tmp_path / "pairs.csv", GOOD_HEADER)
    with pytest.raises(DataError) as e:
        read_pairs(path, format)
    assert str(e.value) == f"{path}: no pairs after the header"


@pytest.mark.parametrize("format", ["auto", "generic"])
def test_nonexistent_file(tmp_path, format):
    path = tmp_path / "absent.csv"
    with pytest.raises(DataError) as e:
        read_pairs(path, format)
    assert str(e.value) == f"{path}: no such file"


def test_formats_are_described():
    assert {"quora", "generic", "msrp", "paws", "sts", "sick"} <= set(FORMATS)
    assert all(f.description for f in FORMATS.values())
