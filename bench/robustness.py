"""Hostile-user probes of issue 20 (input files, output folders, tampered folders, kills, concurrent
saves), run against the installed ``siamese`` command. Prints tried / clean / failed per group.

A probe is clean when the command does what it should: a one-line ``error: ...`` with exit code 2
for bad input (and nothing written), or the right result for odd but valid input (UTF-16 with a
BOM); after a kill or a race, the folder loads.

    python bench/robustness.py [--kills 20] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(sys.executable).parent / "siamese"
WRITER = """
import sys
from siamese import ModelConfig, SiameseModel
texts = ["how do i learn python", "what is the best way to learn python", "where is the station"]
models = [SiameseModel.build(texts, ModelConfig(dim=64, seed=s)) for s in (1, 2)]
print("ready", flush=True)
for i in range(int(sys.argv[2])):
    models[i % 2].save(sys.argv[1])
"""


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=600)


def one_line_error(proc) -> bool:
    lines = proc.stderr.strip().splitlines()
    return proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")


def loads(folder: Path) -> bool:
    return subprocess.run([str(SCRIPT), "predict", str(folder), "a b", "a c"], capture_output=True).returncode == 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--data", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "data")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="robustness-"))
    results: dict[str, list[bool]] = {}
    add = lambda group, ok: results.setdefault(group, []).append(bool(ok))  # noqa: E731
    try:
        from siamese import ModelConfig, SiameseModel

        model = work / "model"
        SiameseModel.build(
            ["how do i learn python", "where is the station", "is it raining"], ModelConfig(dim=16)
        ).save(model)
        quora = (
            (args.data / "quora/quora_question_pairs_sample300.csv")
            .read_text(encoding="utf-8")
            .splitlines(keepends=True)
        )

        # -- input files
        def pairs_file(name, lines, encoding="utf-8"):
            path = work / name
            path.write_bytes("".join(lines).encode(encoding))
            return path

        rng = random.Random(0)
        for _ in range(10):  # one quote opened and never closed, at random rows
            lines = list(quora)
            i = rng.randrange(1, len(lines))
            parts = lines[i].replace('"', "").split(",")
            parts[3] = '"' + parts[3]
            lines[i] = ",".join(parts)
            add("input files", one_line_error(cli("evaluate", model, "--data", pairs_file("q.csv", lines))))
        add(
            "input files",
            one_line_error(
                cli("evaluate", model, "--data", pairs_file("w.csv", quora[:5] + [quora[5].strip() + ",x\n"]))
            ),
        )
        add(
            "input files",
            one_line_error(
                cli(
                    "evaluate",
                    model,
                    "--data",
                    pairs_file("d.csv", ["id,qid1,qid2,question1,question1,is_duplicate\n"] + quora[1:]),
                    "--text1",
                    "question1",
                    "--text2",
                    "question2",
                    "--label",
                    "is_duplicate",
                )
            ),
        )
        add(
            "input files",
            one_line_error(
                cli(
                    "evaluate",
                    model,
                    "--data",
                    pairs_file("t.csv", [x.replace(",", "\t") for x in quora]),
                    "--text1",
                    "question1",
                    "--text2",
                    "question2",
                    "--label",
                    "is_duplicate",
                )
            ),
        )
        ok = cli("evaluate", model, "--data", pairs_file("u16.csv", quora, "utf-16"), "--json")
        add("input files", ok.returncode == 0 and json.loads(ok.stdout)["n"] == 300)
        add(
            "input files",
            one_line_error(
                cli("evaluate", model, "--data", pairs_file("n16.csv", quora, "utf-16-le"), "--format", "quora")
            ),
        )
        add("input files", one_line_error(cli("evaluate", model, "--data", work)))
        add(
            "input files", one_line_error(cli("encode", model, "--data", work / "missing.txt", "--out", work / "v.npy"))
        )
        questions = pairs_file("qs.csv", ["question\n"] + ['"' + x.split(",")[3] + "\n" for x in quora[1:20]])
        add("input files", one_line_error(cli("index", "build", model, "--data", questions, "--out", work / "idx0")))

        # -- output paths
        texts = pairs_file("texts.txt", ["how do i learn python\n", "where is the station\n"])
        mine = work / "mine"
        mine.mkdir()
        (mine / "keep.txt").write_text("keep")
        add(
            "outputs",
            one_line_error(cli("index", "build", model, "--data", texts, "--out", mine))
            and (mine / "keep.txt").exists(),
        )
        add(
            "outputs",
            one_line_error(cli("index", "build", model, "--data", texts, "--out", ".", cwd=mine))
            and (mine / "keep.txt").exists(),
        )
        add(
            "outputs",
            one_line_error(cli("index", "build", model, "--data", texts, "--out", texts))
            and texts.read_text().startswith("how"),
        )
        add("outputs", one_line_error(cli("index", "build", model, "--data", texts, "--out", texts / "x")))
        add("outputs", one_line_error(cli("encode", model, "--data", texts, "--out", mine, "--quiet")))
        add("outputs", one_line_error(cli("encode", model, "--data", texts, "--out", texts / "v.npy", "--quiet")))

        # -- tampered model folders
        config = json.loads((model / "config.json").read_text())
        for fields in [
            {"vocab_size": 10**15},
            {"dim": 10**12},
            {"dim": 4096},
            {"dim": -1},
            {"oov_buckets": -5},
            {"dim": "x"},
            {"lowercase": "yes"},
            {"threshold": None},
            {"char_buckets": 10**13},
            {"encoder_options": {"dim": 10**9}},
            {"encoder_options": json.loads("[" * 500 + "]" * 500)},
        ]:
            bad = Path(shutil.copytree(model, work / "bad-model", dirs_exist_ok=True))
            (bad / "config.json").write_text(json.dumps({**config, **fields}))
            add("tampered models", one_line_error(cli("predict", bad, "a", "b")))
        bad = Path(shutil.copytree(model, work / "bad-model", dirs_exist_ok=True))
        (bad / "config.json").write_text(json.dumps(config)[:-1] + ', "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
        add("tampered models", one_line_error(cli("predict", bad, "a", "b")))
        from safetensors.torch import load_file, save_file

        bad = Path(shutil.copytree(model, work / "bad-model", dirs_exist_ok=True))
        (bad / "config.json").write_text(json.dumps(config))
        state = load_file(str(bad / "model.safetensors"))
        state["embedding.weight"][1, 1] = float("nan")
        save_file(state, str(bad / "model.safetensors"))
        add("tampered models", one_line_error(cli("predict", bad, "a", "b")))

        # -- tampered index folders
        index = work / "idx"
        assert cli("index", "build", model, "--data", texts, "--out", index, "--quiet").returncode == 0
        meta = json.loads((index / "index.json").read_text())
        cases = {
            "texts.jsonl": [None, "{oops\n", '{"id": 0, "text": 1}\n', "[1]\n", ""],
            "index.json": [
                json.dumps({**meta, "kind": "hnsw"}),
                json.dumps({**meta, "kind": "annoy"}),
                json.dumps({**meta, "dim": 7}),
                json.dumps({**meta, "size": "n"}),
            ],
            "index.faiss": [None, "garbage"],
        }
        for name, contents in cases.items():
            for content in contents:
                bad = Path(shutil.copytree(index, work / "bad-idx", dirs_exist_ok=True))
                if content is None:
                    (bad / name).unlink()
                else:
                    (bad / name).write_text(content)
                add("tampered indexes", one_line_error(cli("search", bad, "where is it", "--model", model)))

        # -- kills mid-save, concurrent saves
        target = work / "saved"
        SiameseModel.build(["a b"], ModelConfig(dim=8)).save(target)
        for _ in range(args.kills):
            proc = subprocess.Popen(
                [sys.executable, "-c", WRITER, str(target), "1000000"], stdout=subprocess.PIPE, text=True
            )
            proc.stdout.readline()
            time.sleep(rng.uniform(0, 0.4))
            proc.kill()
            proc.wait()
            add("kills mid-save", loads(target))
        writers = [
            subprocess.Popen(
                [sys.executable, "-c", WRITER, str(target), "20"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
            )
            for _ in range(3)
        ]
        seen_missing = 0
        while any(w.poll() is None for w in writers):
            seen_missing += not (target / "config.json").is_file()
            time.sleep(0.01)
        add("concurrent saves", all(w.returncode == 0 for w in writers) and seen_missing == 0 and loads(target))
        left = [p.name for p in work.iterdir() if p.name.startswith(".saved.")]
        add("concurrent saves", not left)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    total = [0, 0]
    for group, oks in results.items():
        print(f"{group:18s} tried {len(oks):3d}  clean {sum(oks):3d}  failed {len(oks) - sum(oks):3d}")
        total[0] += len(oks)
        total[1] += sum(oks)
    print(f"{'all':18s} tried {total[0]:3d}  clean {total[1]:3d}  failed {total[0] - total[1]:3d}")


if __name__ == "__main__":
    main()
