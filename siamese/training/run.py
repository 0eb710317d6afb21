"""A training run from files to a model folder, as ``siamese train`` runs it:
:func:`train_run` reads the pair files (or answer-selection sets, as triplets), applies the
weights and the validation and test splits, trains (:func:`siamese.training.bi_encoder.train`,
on ``nproc`` local workers if asked), saves the model and reports, test split included. A
checkpoint keeps the run's options, so ``TrainRun(resume=CHECKPOINT)`` alone continues it. It returns
a :class:`~siamese.io.report.RunReport` whose ``value`` is the model."""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from .. import errors
from ..config.configs import ModelConfig, TrainConfig, jsonable_config
from ..config.loss import LossConfig
from ..config.options import declared_options, is_path
from ..config.run import TrainRun
from ..errors import ConfigError, SiameseError
from ..io.report import RunReport

RUN_KEY = "train"  # where a checkpoint's meta.run keeps this run's options


def train_run(
    run: TrainRun,
    model_config: ModelConfig | None = None,
    config: TrainConfig | None = None,
    *,
    progress: bool = True,
) -> RunReport:
    """Train on ``run.data`` and save the model to ``run.out``; see :class:`TrainRun`. With
    ``run.resume`` and no data, the run's options (these three arguments) come from the checkpoint.
    ``model_config`` defaults to the hinge loss for answer sets (``run.answers``), else
    :class:`ModelConfig`'s. Under torchrun every worker calls this; rank 0 writes and reports."""
    if run.resume is not None and not run.data:
        run, model_config, config = saved_run(run.resume, overwrite=run.overwrite)
    if not run.data or run.out is None:
        raise ConfigError("give --data FILE and --out DIR (or --resume CHECKPOINT to continue a run)")
    if run.from_ is not None:
        return learn_run(run, model_config or ModelConfig(), config or TrainConfig(), progress=progress)
    model_config = model_config or ModelConfig(loss="hinge" if run.answers else "triplet")
    config = config or TrainConfig()
    if run.nproc > 1 and not _in_workers():  # the launched workers run this again, as torchrun's do
        return _launch(run, model_config, config, progress)
    _check_out(run, model_config, config)
    from .bi_encoder import prepare, train

    if run.answers and model_config.cross:
        raise ConfigError("a cross-encoder trains on labelled pairs, not answer-selection triplets (answers)")
    recipe = prepare(model_config, config)  # the configurations checked before reading or training
    pairs, val, test, val_questions = read_train_data(run, seed=config.seed)
    model = train(
        pairs,
        val,
        recipe=recipe,
        checkpoint=run.resume or run.checkpoint,
        resume=run.resume is not None,
        run={RUN_KEY: run_json(replace(run, resume=None), model_config, config)},
        progress=progress,
    )
    if "threshold" not in model.info["training"]:  # a worker other than rank 0: it writes and says nothing
        return RunReport({}, [], model)
    save_with_test(model, run, test)
    result, lines = _report(model, run, model_config, config, val_questions, test)
    return RunReport(result, lines, model)


def save_with_test(model, run: TrainRun, test) -> None:
    """The model folder, written atomically, with the held-out split as ``test.csv`` when there is one."""
    from ..io.atomic import atomic_dir

    with atomic_dir(run.out, overwrite=run.overwrite, kind="model") as tmp:
        model.write(tmp)
        if test is not None:
            write_pairs_csv(test, tmp / TEST_FILE)
    model.path = Path(run.out).resolve()


TEST_FILE = "test.csv"


def write_pairs_csv(pairs, path: Path) -> None:
    """Pairs as CSV text1,text2,label (the generic format every pair-reading command reads)."""
    import csv

    with open(path, "w", encoding="utf-8", newline="") as f:
        out = csv.writer(f, lineterminator="\n")
        out.writerow(["text1", "text2", "label"])
        out.writerows(zip(pairs.text1, pairs.text2, (int(y) for y in pairs.labels)))


def _check_out(run: TrainRun, model_config: ModelConfig, config: TrainConfig) -> None:
    """Refuse a bad ``out`` before any work: never one of the inputs, never another kind of folder."""
    from ..io.atomic import check_not_input, check_target

    options = model_config.encoder_options
    reads = [*run.data, run.val_data, model_config.glove, options.get("prior"), options.get("path"), run.from_]
    if isinstance(config.teacher, (str, os.PathLike)):
        reads.append(config.teacher)
    check_not_input(run.out, [r for r in reads if r is not None])
    check_target(run.out, overwrite=run.overwrite, kind="model")


def read_train_data(run: TrainRun, *, seed: int = 0) -> tuple[Any, Any, Any, Any]:
    """(training, validation, test, validation questions): the pairs of ``run.data`` (weighted,
    the test and validation splits taken out), test None unless ``run.test_fraction``; with
    ``run.answers``, triplets and the validation questions."""
    from ..data.pairs import Pairs, read_pairs, split_pairs

    if run.answers:
        pairs, val, val_questions = _answer_triplets(run, seed)
        return pairs, val, None, val_questions
    parts = [read_pairs_of(run, p) for p in run.data]
    if run.weight:
        if len(run.weight) != len(parts):
            raise ConfigError(
                f"--weight given {len(run.weight)} times for {len(parts)} --data files; give one per file"
            )
        if not any(run.weight):
            raise ConfigError(
                "every --weight is 0: nothing would be trained on; give at least one file a weight above 0"
            )
        parts = [part.with_weight(w) for part, w in zip(parts, run.weight)]
    pairs, test = Pairs.concat(parts), None
    if run.test_fraction > 0:
        test, pairs = held_out_split(pairs, run.test_fraction, seed=seed)
    if run.val_data is not None:
        val = read_pairs(run.val_data, run.format, text1=run.text1, text2=run.text2, label=run.label)
    else:
        val, pairs = split_pairs(pairs, [run.val_fraction], seed=seed)
    return pairs, val, test, None


def held_out_split(pairs: Any, fraction: float, *, seed: int = 0) -> tuple[Any, Any]:
    """(test, rest): about ``fraction`` of the pairs, whole connected groups of the pair graph on each
    side (every question's pairs on one side), refused in one line unless each side can be used."""
    from ..data.groups import grouped_split
    from ..errors import DataError

    test, rest = grouped_split(pairs, fraction, seed=seed)
    if len(set(test.labels.tolist())) < 2 or len(rest) == 0:
        raise DataError(
            f"{pairs.source}: --test-fraction {fraction}: the pairs form too few separate groups (pairs that share a "
            f"text must stay on one side) for a test split with both labels; lower it or give more pairs"
        )
    return test, rest


def _answer_triplets(run: TrainRun, seed: int):
    """Training and validation triplets from answer-selection sets, and the validation questions."""
    import numpy as np

    from ..data.answers import make_triplets, read_answers

    questions = [q for path in run.data for q in read_answers(path)]
    if run.val_data is not None:
        val_questions = read_answers(run.val_data)
    else:
        order = np.random.default_rng(seed).permutation(len(questions))
        cut = max(1, round(run.val_fraction * len(questions)))
        val_questions = [questions[i] for i in order[:cut]]
        questions = [questions[i] for i in order[cut:]]
    source = "+".join(str(p) for p in run.data)
    return (
        make_triplets(questions, negatives=run.negatives, seed=seed, source=source),
        make_triplets(val_questions, negatives=run.negatives, seed=seed, source=str(run.val_data or source)),
        val_questions,
    )


# -- learning from labels, from a pretrained encoder ------------------------------------------------------------


def learn_run(run: TrainRun, model_config: ModelConfig, config: TrainConfig, *, progress: bool = True) -> RunReport:
    """``siamese train --from SOURCE``: the labels of ``run.data`` learned from ``SOURCE``
    (:func:`siamese.training.learn.learn`), saved with the test split if asked, reported."""
    from ..data.pairs import Pairs
    from ..decision.decide import threshold_line
    from .learn import LearnOptions, learn, learned_line, probability_line, threshold_note

    if run.answers or model_config.cross:
        raise ConfigError("--from learns from labelled pairs into a bi-encoder: it takes neither --answers nor --cross")
    if run.nproc > 1 or run.checkpoint is not None or run.resume is not None:
        raise ConfigError("--from trains in one process: it takes no --nproc, --checkpoint or --resume")
    if run.val_data is not None or run.weight:
        raise ConfigError("--from chooses by cross-validation on --data itself: leave out --val-data and --weight")
    ignored = options_learn_ignores(model_config, config)
    if ignored:
        raise ConfigError(
            f"--from fine-tunes the source's own transformer, head and loss by its own recipe: leave out "
            f"{', '.join(ignored)} (it takes --epochs, --lr, --batch-size, --seed, --threshold-metric, --device and "
            "--frozen-layers)"
        )
    _check_out(run, model_config, config)
    parts = [read_pairs_of(run, p) for p in run.data]
    pairs, test = Pairs.concat(parts), None
    if run.test_fraction > 0:
        test, pairs = held_out_split(pairs, run.test_fraction, seed=config.seed)
        pairs.source = f"{pairs.source} less the --test-fraction {run.test_fraction} split ({len(test)} pairs)"
    unset = LearnOptions()
    options = LearnOptions(
        epochs=config.epochs or unset.epochs,
        lr=unset.lr if config.lr is None else config.lr,
        batch_size=config.batch_size or unset.batch_size,
        frozen_layers=model_config.encoder_options.get("frozen_layers"),
        seed=config.seed,
        metric=config.threshold_metric,
        device=config.device,
    )
    model = learn(pairs, run.from_, options=options, progress=progress)
    save_with_test(model, run, test)
    info = model.info["learned"]
    result = {
        "out": str(run.out),
        "from": str(run.from_),
        "labels": info["labels"],
        "chosen": info["chosen"],
        "epochs": info["epoch"] if info["chosen"] == "fine-tuned" else 0,
        "plan": info["plan"],
        "cross_validation": info["cross_validation"],
        "threshold": model.threshold,
        "threshold_choice": info["threshold_choice"],
        "calibration": info["calibration"],
        "seconds": info["seconds"],
    }
    chosen = threshold_line(model.threshold, {"note": threshold_note(info)}, 0)
    lines = [learned_line(info), chosen, probability_line(info), f"saved to {run.out}"]
    if test is not None:
        from ..io.progress import tqdm

        with tqdm(total=1, desc=f"score the test split as-is and learned ({len(test)} pairs)", unit="split",
                  disable=not progress) as bar:  # fmt: skip
            result["test"], line = _test_as_is_and_learned(model, run.from_, pairs, test, config.threshold_metric)
            bar.update(1)
        lines.append(line)
    return RunReport(result, lines, model)


LEARN_TAKES = frozenset({"epochs", "lr", "batch_size", "seed", "threshold_metric", "device"})


def options_learn_ignores(model_config: ModelConfig, config: TrainConfig) -> list[str]:
    """The flags of the options set (away from their defaults) that learning ``--from`` a pretrained encoder
    would not use: the from-scratch recipe's encoder, head, loss and training options."""
    given = {ModelConfig: model_config, TrainConfig: config, LossConfig: config.loss_options}
    unset = {ModelConfig: ModelConfig(), TrainConfig: TrainConfig(), LossConfig: LossConfig()}
    flags = [
        (d.option.flags or (f"--{d.name.replace('_', '-')}",))[0].split("/")[0]
        for d in declared_options(ModelConfig, TrainConfig)
        if d.name not in LEARN_TAKES and getattr(given[d.owner], d.name) != getattr(unset[d.owner], d.name)
    ]
    named = {"pooling": "--pooling", "path": "--transformer", "prior": "--prior"}  # siamese train's own flags
    extra = sorted(set(model_config.encoder_options) - {"frozen_layers"})
    return flags + [named.get(key, f"-o {key}") for key in extra]


def read_pairs_of(run: TrainRun, path: Path) -> Any:
    """One pair file of the run, read with its format and columns."""
    from ..data.pairs import read_pairs

    return read_pairs(path, run.format, text1=run.text1, text2=run.text2, label=run.label)


def _test_as_is_and_learned(model, source, labels, test, metric: str) -> tuple[dict, str]:
    """The held-out split scored by the learned model and by ``source`` as it is (its threshold
    fitted on the same labels)."""
    from ..decision.threshold import fit_threshold
    from ..evaluation.metrics import evaluate
    from ..models.sentence_encoder import load_bi_encoder

    as_is = load_bi_encoder(source)
    cosines = (as_is.encode(labels.text1) * as_is.encode(labels.text2)).sum(1)
    as_is.set_threshold(fit_threshold(cosines, labels.labels, metric)[0])
    both = {"as_is": evaluate(as_is, test), "learned": evaluate(model, test)}
    a, b = both["as_is"], both["learned"]
    line = (
        f"held-out test split ({a['n']} pairs, test.csv): accuracy as-is {a['accuracy']:.3f} -> learned "
        f"{b['accuracy']:.3f}, ROC-AUC {a['roc_auc']:.3f} -> {b['roc_auc']:.3f}"
    )
    return both, line


# -- the run's options in a checkpoint --------------------------------------------------------------------------


def run_json(run: TrainRun, model_config: ModelConfig, config: TrainConfig) -> dict:
    """The run's options as JSON (paths as text): what a checkpoint keeps for a resume."""

    def text(value):
        if isinstance(value, list):
            return [text(v) for v in value]
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    return {
        "run": {k: text(v) for k, v in asdict(run).items()},
        "model_config": json.loads(json.dumps(asdict(model_config))),
        "config": jsonable_config(config),
    }


def run_from_json(saved: dict) -> tuple[TrainRun, ModelConfig, TrainConfig]:
    """:func:`run_json` read back: paths as paths again (by their declared types)."""
    values = dict(saved["run"])
    for d in declared_options(TrainRun):
        value = values.get(d.name)
        if value is not None and is_path(d.type):
            values[d.name] = [Path(v) for v in value] if isinstance(value, list) else Path(value)
    known = {f.name for f in dataclasses.fields(TrainConfig)}
    config = {k: v for k, v in saved["config"].items() if k in known}
    config["loss_options"] = LossConfig(**config.get("loss_options", {}))
    return TrainRun(**values), ModelConfig(**saved["model_config"]), TrainConfig(**config)


def saved_run(checkpoint: str | os.PathLike, *, overwrite: bool = False) -> tuple[TrainRun, ModelConfig, TrainConfig]:
    """The options of the run that wrote ``checkpoint``, set to resume it."""
    from .loop import read_checkpoint

    saved = read_checkpoint(checkpoint)[2].get("run", {})
    if RUN_KEY not in saved:
        raise ConfigError(
            f"{checkpoint}: this checkpoint was written by train(), not a training run from files; "
            "resume it with train(..., checkpoint=..., resume=True)"
        )
    try:
        run, model_config, config = run_from_json(saved[RUN_KEY])
    except (TypeError, KeyError, ValueError, AttributeError) as e:
        raise errors.ModelError(f"{checkpoint}: the saved training options are damaged ({e})") from None
    return replace(run, resume=Path(checkpoint), overwrite=run.overwrite or overwrite), model_config, config


# -- local workers ----------------------------------------------------------------------------------------------


def _in_workers() -> bool:
    from ..runtime.distributed import world

    return world().distributed


def _launch(run: TrainRun, model_config: ModelConfig, config: TrainConfig, progress: bool) -> RunReport:
    """The run on ``run.nproc`` local workers (siamese.runtime.distributed.launch); rank 0's report
    comes back, and a user error in a worker is raised here as the same error."""
    import logging

    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from ..models.loading import load_model
    from ..runtime.distributed import launch

    elastic = logging.getLogger("torch.distributed.elastic")
    level = elastic.level
    elastic.setLevel(logging.CRITICAL)  # its traceback of a worker's exit code 2 would bury our one line
    with tempfile.TemporaryDirectory(prefix="siamese-workers-") as tmp:
        failure = Path(tmp) / "error.json"
        try:
            returned = launch(run.nproc, _worker, run, model_config, config, progress, str(failure))
        except ChildFailedError as e:
            codes = {f.exitcode for f in e.failures.values()}
            if codes == {2} and failure.is_file():
                error = json.loads(failure.read_text(encoding="utf-8"))
                raise getattr(errors, error["type"], SiameseError)(error["message"]) from None
            for f in e.failures.values():
                print(f.message if isinstance(f.message, str) else json.dumps(f.message), file=sys.stderr)
            raise SiameseError(f"a training worker failed (exit codes {sorted(codes)})") from None
        finally:
            elastic.setLevel(level)
    result, lines = returned[0]
    return RunReport(result, lines, load_model(result["out"]))


def _worker(run: TrainRun, model_config, config, progress: bool, failure: str):
    """One launched worker: the run; a user error is written once (by rank 0) for the launcher
    and ends the worker with exit code 2."""
    from ..runtime.distributed import world

    try:
        report = train_run(run, model_config, config, progress=progress)
    except SiameseError as e:
        if world().main:
            Path(failure).write_text(json.dumps({"type": type(e).__name__, "message": str(e)}), encoding="utf-8")
        sys.exit(2)
    return report.result, report.lines


# -- the report -------------------------------------------------------------------------------------------------


def _pairs_used(info: dict, loss: str) -> str:
    """Which pairs the loss learned from, in words."""
    used, given = info["train_pairs"], info.get("given_pairs", info["train_pairs"])
    how = {
        "positives": f"duplicate pairs of {given}: the {loss} loss learns from duplicates, "
        "the rest of the batch gives negatives",
        "labelled": f"labelled pairs: the {loss} loss learns from both labels",
        "pairs": f"pairs: the {loss} loss learns from every pair whatever its label",
        "triplets": f"triplets: the {loss} loss learns from (question, right, wrong) answers",
    }.get(info.get("trains_on"), "pairs")
    return f"{used} {how}"


def _report(model, run: TrainRun, model_config: ModelConfig, config: TrainConfig, val_questions, test):
    """The result (JSON) and the lines a person reads."""
    from ..decision.decide import threshold_line

    info = model.info["training"]
    last = info["history"][-1]
    cross = model_config.cross
    recipe = (
        {"transformer": str(model_config.encoder_options.get("path") or "minilm"), "loss": info["loss"]}
        if cross
        else {"encoder": model.config.encoder, "head": model.config.head, "loss": info["loss"]}
    )
    result = {
        "out": str(run.out),
        **({"kind": "cross"} if cross else {}),
        "train_pairs": info["train_pairs"],
        "val_pairs": info["val_pairs"],
        "epochs": len(info["history"]),
        "best_epoch": info["best_epoch"],
        "loss": last["loss"],
        "val_loss": last.get("val_loss"),
        "threshold": model.threshold,
        "pairs_per_second": info["pairs_per_second"],
        "warmup_seconds": info["warmup_seconds"],
        "seconds": info["seconds"],
        "recipe": recipe,
        "trains_on": info.get("trains_on"),
        "threshold_choice": info["threshold_choice"],
        "calibration": info["calibration"],
    }
    what = "cross-encoder trained" if cross else "trained"
    lines = [
        f"{what} on {_pairs_used(info, info['loss'])}, for {result['epochs']} epochs in {result['seconds']:.1f}s "
        f"({result['pairs_per_second']:.0f} pairs/s); best epoch {result['best_epoch']}",
        threshold_line(model.threshold, info["threshold_choice"], result["val_pairs"]),
        f"saved to {run.out}",
    ]
    if info["calibration"]["fitted"]:
        lines.append(f"calibrated on the validation pairs: {info['calibration']['method']}")
    elif config.calibrate:
        lines.append(f"not calibrated ({info['calibration']['note']})")
    if val_questions is not None:
        from ..data.answers import ranking_report

        result["validation_ranking"] = r = ranking_report(model.similarity_pairwise, val_questions)
        lines.append(f"validation ranking ({r['questions']} questions): MAP {r['map']:.4f}, MRR {r['mrr']:.4f}")
    if "glove" in model.info:
        result["glove"] = g = model.info["glove"]
        lines.append(f"GloVe covers {g['covered']} of {g['total']} words ({100 * g['fraction']:.1f}%)")
    if test is not None:
        from ..evaluation.metrics import evaluate

        result["test"] = t = evaluate(model, test)
        f1 = f", F1 {t['f1']:.4f}" if "f1" in t else ""
        lines.append(
            f"held-out test split ({t['n']} pairs): accuracy {t['accuracy']:.4f}{f1}, ROC-AUC {t['roc_auc']:.4f}"
        )
    return result, lines
