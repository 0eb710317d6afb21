#!/usr/bin/env python
"""Reference throughput benchmark: the seed Keras Siamese LSTM (TF/Keras 2).

Run with the separate TF venv (see bench/tf_env.sh), never the torch env:

    bench/.venv-tf/bin/python bench/keras_seed.py --pairs PAIRS.csv \
        --epochs 3 --batch-size 256 [--threads 2] [--val VAL.csv]

PAIRS.csv / VAL.csv: csv with header ``text1,text2``; every row is a
duplicate (positive) pair.  Prints exactly one JSON line on stdout; all
TF/Keras chatter goes to stderr.

Model, loss and training loop reproduce the seed notebook
(shared/seeds/001_d16a44c0d55183fa.txt):

* TextVectorization(output_mode='int', split='whitespace',
  standardize='strip_punctuation') adapted on text1+text2 of the training
  pairs; no output_sequence_length, so each batch is padded to its longest
  text.
* branch: TextVectorization -> Embedding(vocab, 128) -> LSTM(128,
  return_sequences=True) -> GlobalAveragePooling1D -> Lambda(l2_normalize);
  the two string inputs share the branch; outputs concatenated -> (None, 256).
* triplet loss with hard negative mining, margin 0.25, summed over the batch.
* Adam(0.01); Dataset.from_tensor_slices(((q1, q2), dummy_labels))
  .shuffle(N, seed=7, reshuffle_each_iteration=True).batch(B); model.fit.

Note on the normalisation: the seed writes ``tf.math.l2_normalize(x)``
without ``axis``, i.e. axis=None, which divides the whole (batch, 128) block
by one Frobenius norm rather than normalising each row.  ``--l2-axis none``
(the default) keeps that exactly; ``--l2-axis row`` normalises per row
(axis=-1), which is what the notebook's prose describes.  Cost is the same.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", required=True, help="training pairs csv (text1,text2)")
    p.add_argument("--val", help="optional validation pairs csv (text1,text2)")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--threads", type=int, default=2, help="TF intra- and inter-op threads (default 2)")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--d-feature", type=int, default=128)
    p.add_argument("--margin", type=float, default=0.25)
    p.add_argument(
        "--l2-axis",
        choices=("none", "row"),
        default="none",
        help="'none' = seed-exact tf.math.l2_normalize(x) (axis=None); 'row' = per-row normalisation (axis=-1)",
    )
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def read_pairs(path):
    q1, q2 = [], []
    with open(path, newline="", encoding="utf-8") as f:
        reader = csv.DictReader(f)
        missing = {"text1", "text2"} - set(reader.fieldnames or [])
        if missing:
            raise SystemExit(f"{path}: header must contain text1,text2 (missing {sorted(missing)})")
        for row in reader:
            q1.append(row["text1"])
            q2.append(row["text2"])
    if not q1:
        raise SystemExit(f"{path}: no pairs")
    return q1, q2


def build_model(tf, vectorizer, d_feature, l2_axis):
    axis = None if l2_axis == "none" else -1
    branch = tf.keras.models.Sequential(name="sequential")
    branch.add(vectorizer)
    branch.add(
        tf.keras.layers.Embedding(input_dim=vectorizer.vocabulary_size(), output_dim=d_feature, name="embedding")
    )
    branch.add(tf.keras.layers.LSTM(units=d_feature, return_sequences=True, name="LSTM"))
    branch.add(tf.keras.layers.GlobalAveragePooling1D(name="mean"))
    branch.add(tf.keras.layers.Lambda(lambda x: tf.math.l2_normalize(x, axis=axis), name="out"))
    in1 = tf.keras.layers.Input(shape=(1,), dtype=tf.string, name="input_1")
    in2 = tf.keras.layers.Input(shape=(1,), dtype=tf.string, name="input_2")
    out = tf.keras.layers.Concatenate(axis=1, name="conc_1_2")([branch(in1), branch(in2)])
    return tf.keras.models.Model(inputs=[in1, in2], outputs=out, name="SiameseModel")


def make_triplet_loss(tf, margin):
    def triplet_loss_fn(v1, v2):
        scores = tf.linalg.matmul(v2, v1, transpose_b=True)
        n = tf.shape(v1)[0]
        batch_size = tf.cast(n, scores.dtype)
        positive = tf.linalg.diag_part(scores)
        negative_zero_on_duplicate = scores - tf.linalg.diag(positive)
        mean_negative = tf.math.reduce_sum(negative_zero_on_duplicate, axis=1) / (batch_size - 1)
        mask = tf.cast(
            tf.eye(n, dtype=tf.bool) | (negative_zero_on_duplicate > tf.expand_dims(positive, 1)), scores.dtype
        )
        closest_negative = tf.math.reduce_max(scores - 2.0 * mask, axis=1)
        loss_closest = tf.math.maximum(0.0, margin - positive + closest_negative)
        loss_mean = tf.math.maximum(0.0, margin - positive + mean_negative)
        return tf.math.reduce_sum(loss_closest + loss_mean)

    def triplet_loss(labels, out):  # labels: dummy, ignored (as in the seed)
        half = out.shape[-1] // 2
        return triplet_loss_fn(out[:, :half], out[:, half:])

    return triplet_loss


def main(argv=None):
    args = parse_args(argv)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # anything Keras/TF prints goes to stderr

    import numpy as np
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(args.threads)
    tf.config.threading.set_inter_op_parallelism_threads(args.threads)
    tf.random.set_seed(args.seed)

    q1, q2 = read_pairs(args.pairs)
    n_pairs = len(q1)
    q1 = np.array(q1, dtype=object)
    q2 = np.array(q2, dtype=object)

    vectorizer = tf.keras.layers.TextVectorization(
        output_mode="int", split="whitespace", standardize="strip_punctuation"
    )
    vectorizer.adapt(np.concatenate((q1, q2)))
    vocab_size = vectorizer.vocabulary_size()

    def dataset(a, b):
        ds = tf.data.Dataset.from_tensor_slices(((a, b), tf.constant([1] * len(a))))
        return ds.shuffle(len(a), seed=7, reshuffle_each_iteration=True).batch(args.batch_size)

    train_ds = dataset(q1, q2)
    val_ds = None
    if args.val:
        v1, v2 = read_pairs(args.val)
        val_ds = dataset(np.array(v1, dtype=object), np.array(v2, dtype=object))

    model = build_model(tf, vectorizer, args.d_feature, args.l2_axis)
    model.compile(loss=make_triplet_loss(tf, args.margin), optimizer=tf.keras.optimizers.Adam(learning_rate=args.lr))

    class Timer(tf.keras.callbacks.Callback):
        """Training-only wall time per epoch (validation excluded)."""

        def __init__(self):
            super().__init__()
            self.seconds = []
            self._t0 = self._last = None

        def on_epoch_begin(self, epoch, logs=None):
            self._t0 = self._last = time.perf_counter()

        def on_train_batch_end(self, batch, logs=None):
            self._last = time.perf_counter()

        def on_epoch_end(self, epoch, logs=None):
            self.seconds.append(self._last - self._t0)
            logs = logs or {}
            extra = f" val_loss={logs['val_loss']:.4f}" if "val_loss" in logs else ""
            print(
                f"epoch {epoch + 1}/{args.epochs}: train {self.seconds[-1]:.2f}s "
                f"loss={logs.get('loss', float('nan')):.4f}{extra}",
                file=sys.stderr,
            )

    timer = Timer()
    hist = model.fit(train_ds, epochs=args.epochs, validation_data=val_ds, callbacks=[timer], verbose=0)

    secs = timer.seconds
    steady = secs[1:] if len(secs) > 1 else secs
    result = {
        "framework": "keras",
        "tf_version": tf.__version__,
        "pairs": n_pairs,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "l2_axis": args.l2_axis,
        "vocab_size": int(vocab_size),
        "epoch_seconds": [round(s, 4) for s in secs],
        "pairs_per_second": round(n_pairs / statistics.median(steady), 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, 1),
        "epoch_loss": [round(float(x), 4) for x in hist.history["loss"]],
        "final_loss": round(float(hist.history["loss"][-1]), 4),
    }
    if "val_loss" in hist.history:
        result["final_val_loss"] = round(float(hist.history["val_loss"][-1]), 4)
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
