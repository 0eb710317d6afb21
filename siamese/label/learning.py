"""The page's "Learn from these answers": fine-tune the labelling model on the answers saved so far
(:func:`siamese.training.learn.learn`) in a background thread, while labelling goes on; then save
the learned model and carry on asking with it.

- It always starts from the model the session was started with (its folder; for a model that was
  itself learned from labels, the folder it was learned from), on every answer so far: a model
  that already learned from some answers would score them as seen, and the cross-validation that
  decides "fine-tuned or as-is" would favour it unfairly.
- When it is done the learned model is saved atomically to its folder (never over an input), the
  candidate pairs' texts are encoded with it, their similarities and the threshold replaced, and
  the selection told how the old and the new model disagree (:meth:`Selector.learned`).
- The answers it learned from are kept in the labels file, but from then on the statistics (the
  threshold fitted on the answers, precision, recall, the calibration that Save fits) use only the
  answers given after it: the learned model scores its own training pairs too well. (When the
  model is kept as it was, it learned nothing from them: they all still count.)
- A failure becomes one line in :attr:`Learner.status` (the page shows it), never an exception in
  the server.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from ..errors import ConfigError, SiameseError


class Learner:
    """One session's learning: :meth:`start` (refuses in one line) and :meth:`status`."""

    def __init__(self, session, source: Path | None, out: Path | None, *, options=None):
        self.session, self.source, self.out, self.options = session, source, out, options
        self.lock = threading.Lock()
        self.state: dict = {"state": "idle"}
        self.thread: threading.Thread | None = None

    @staticmethod
    def origin(model) -> Path | None:
        """The folder to learn from: for a model that was itself learned from labels (labelling
        resumed with it), the folder it was learned from when that is still there, else its own."""
        before = (model.info.get("pretrained") or {}).get("folder") if model.info.get("learned") else None
        if before and Path(before).is_dir():
            return Path(before)
        return model.path

    def status(self) -> dict:
        with self.lock:
            return dict(self.state)

    def why_not(self) -> str | None:
        """Why this session's model cannot be fine-tuned (None: it can)."""
        from ..models.encoders import TransformerEncoder

        model = self.session.model
        if not isinstance(getattr(model, "encoder", None), TransformerEncoder) or model.config.head != "cosine":
            kind = getattr(getattr(model, "config", None), "encoder", type(model).__name__)
            return (
                f"learning from answers fine-tunes a pretrained transformer bi-encoder (minilm, mpnet); this model "
                f"has the {kind} encoder: label with such a model, or use `siamese train --data LABELS --from minilm`"
            )
        from ..training.learn import TRAINABLE, trainable_network

        if trainable_network(model.encoder.hf_config) is None:
            return (
                f"learning from answers fine-tunes {TRAINABLE}; this model's transformer is "
                f"{model.encoder.hf_config.get('model_type')!r}: use `siamese train --data LABELS --from minilm`"
            )
        if self.source is None:
            return "learning from answers needs the folder the labelling model was loaded from"
        if self.out is None:
            return "this session has no folder to save a learned model to"
        return None

    def start(self) -> dict:
        """Begin learning in a thread; a one-line :class:`SiameseError` when it cannot (already
        learning, a model that cannot be fine-tuned, too few answers)."""
        from ..io.atomic import check_not_input
        from ..training.learn import check_labels

        with self.lock:
            if self.state["state"] == "learning":
                raise ConfigError("already learning from the answers: it goes on in the background; keep labelling")
            reason = self.why_not()
            if reason:
                raise ConfigError(reason)
            assert self.source is not None and self.out is not None  # why_not says so otherwise
            check_not_input(self.out, [self.source, self.session.store.path])  # never over an input
            pairs = self.session.labelled_pairs()
            check_labels(pairs)  # "label N more duplicate(s)": a DataError, one line
            self.state = {"state": "learning", "answers": len(pairs), "started": time.time()}
            run = (pairs, self.source, self.out)
            self.thread = threading.Thread(target=self._run, args=run, name="siamese-learn", daemon=True)
            self.thread.start()
            return dict(self.state)

    def _run(self, pairs, source: Path, out: Path) -> None:
        from ..training.learn import learn, learned_line

        started = time.perf_counter()
        try:
            model = learn(pairs, source, options=self.options, progress=False)  # the page shows its own state
            info = model.info["learned"]
            model.save(out, overwrite=False)
            kept = info["chosen"] == "as-is" and self.session.model.path is not None
            same = kept and Path(source).resolve() == Path(self.session.model.path).resolve()
            self.session.adopt(model, learned_on=pairs, same_vectors=same)
            cv = info["cross_validation"]
            done = {
                "state": "done",
                "answers": len(pairs),
                "chosen": info["chosen"],
                "before": cv["as_is"]["accuracy"],
                "after": cv["fine_tuned"]["accuracy"] if info["chosen"] == "fine-tuned" else cv["as_is"]["accuracy"],
                "fine_tuned": cv["fine_tuned"]["accuracy"],
                "auc_before": cv["as_is"]["roc_auc"],
                "auc_fine_tuned": cv["fine_tuned"]["roc_auc"],
                "plan": info["plan"],
                "threshold": float(model.threshold),
                "path": str(out),
                "seconds": round(time.perf_counter() - started, 1),
                "message": learned_line(info),
            }
        except SiameseError as e:
            done = {"state": "failed", "answers": len(pairs), "message": _one_line(str(e))}
        except Exception as e:  # noqa: BLE001  (any failure is a line on the page, never a dead server)
            done = {"state": "failed", "answers": len(pairs), "message": _one_line(f"{type(e).__name__}: {e}")}
        with self.lock:
            self.state = done


def disagreement(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """How much two models disagree about each candidate: the difference of its rank among the
    candidates (0–1) by each model's similarity. Ranks, not cosines: a fine-tune moves the whole
    scale of the cosines."""
    from scipy.stats import rankdata

    if len(old) < 2:
        return np.zeros(len(old))
    scale = len(old) - 1
    return np.abs((rankdata(old) - 1) / scale - (rankdata(new) - 1) / scale)


def _one_line(text: str) -> str:
    line = " ".join(text.split())
    return line if line else "learning failed"


__all__ = ["Learner", "disagreement"]
