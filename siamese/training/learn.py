"""Learning a user's duplicates from their labels, starting from a pretrained sentence encoder
(``siamese train --data LABELS --from minilm``): :func:`learn`.

The recipe, made for 50–5,000 labels on a laptop:

- Only the top layers of the transformer are fine-tuned. The embeddings and the bottom layers stay
  as they are, and their output for each distinct text is computed once and kept (bf16), so an
  epoch runs only the top layers: several times cheaper than fine-tuning the whole network, and
  the frozen bottom keeps the pretrained model's general knowledge. Long texts are held to a token
  budget per batch where nothing is trained, and recompute their activations where it is, and big
  blocks go back to the system when freed (:mod:`siamese.runtime.memory`), to save memory.
- The loss is CoSENT on the cosines of the labelled pairs (every pair teaches, both labels), AdamW
  with a warm-up and a linear decay, the gradient norm clipped.
- The number of epochs is chosen by grouped cross-validation on the labels themselves: folds
  hold whole connected groups of the pair graph (no text of a held-out pair is seen in training),
  and the epoch with the best held-out ROC-AUC wins. Above :data:`HOLDOUT_ABOVE` labels one grouped
  quarter is held out instead of K folds (the model trained on the rest is the final one; ``refit``
  trains again on every label instead).
- **Never worse than as-is.** The held-out cosines of the fine-tuned models and of the pretrained
  model are compared two ways on the same folds: the accuracy of a threshold fitted on the other
  folds, and the ranking (ROC-AUC, mean over folds). The fine-tune is kept if its accuracy is
  higher or its ROC-AUC higher by :data:`AUC_MARGIN`; otherwise the result is the pretrained model
  with its threshold fitted on the labels (``fit_threshold``: where a Platt fit crosses 1/2), and the
  report says so. (A fitted threshold's accuracy
  on 200 labels moves by a few points with the draw; the ranking less. Accuracy alone threw away
  every MSRP fine-tune, 2-3 points better on pool pairs outside the labels: chosen on those pairs,
  bench/learn_gate_selection.py, docs/benchmarks.md.)
- The kept fine-tune's threshold is the midpoint of the one chosen on the held-out cosines (of
  fold models, trained on fewer labels) and the one chosen on the final model's own cosines of the
  labels (flattered by training on them): each alone missed by a few points on some sets. With one
  held-out quarter the model kept is the one those cosines came from, and its threshold is where a
  Platt fit of them crosses 1/2 (steadier than their best cut).

The result is an ordinary Siamese model folder (a transformer encoder with the cosine head);
``info["learned"]`` records what the cross-validation measured."""

from __future__ import annotations

import copy
import math
import os
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from ..data.groups import grouped_folds, pair_groups
from ..data.pairs import Pairs, PairsLike, as_pairs
from ..errors import ConfigError, DataError, ModelError
from ..models.siamese import SiameseModel

MIN_LABELS = 20  # fewer cannot fill cross-validation folds with both kinds of answer
MIN_EACH = 6  # of each label
FOLDS = 3  # cross-validation folds up to HOLDOUT_ABOVE labels
HOLDOUT_ABOVE = 600  # above it: one grouped quarter held out, trained once (the cost stays ~flat)
HOLDOUT_SHARE = 0.25
STATES_TOKENS = 2048  # padded tokens per batch when the frozen layers run once per text
RECOMPUTE_ABOVE = 128  # tokens: wider training batches recompute their activations in the backward pass
AUC_MARGIN = 0.01  # a held-out ROC-AUC this much higher keeps a fine-tune whose fitted threshold is not more accurate


@dataclass
class LearnOptions:
    """The recipe's hyper-parameters (the defaults are the measured recipe)."""

    epochs: int = 4  # the most epochs; cross-validation picks how many of them
    lr: float = 5e-5
    batch_size: int = 16
    frozen_layers: int | None = None  # None: the bottom half of the layers
    scale: float = 20.0  # CoSENT's
    # Added to CoSENT with this weight: sentence-transformers' OnlineContrastiveLoss (margin 0.5 on 1 - cosine,
    # the batch's hard pairs only), which pushes duplicates and non-duplicates to either side of a margin
    # where CoSENT only orders them. 0: CoSENT alone. Left off: weights 1-16 moved accuracy on pool pairs outside
    # 200 labels by +0.0 to +0.1 point on the mean of up to 17 set-seeds (docs/benchmarks.md).
    contrastive: float = 0.0
    # Added to CoSENT with this weight: an in-batch ranking term (sentence-transformers'
    # MultipleNegativesRankingLoss, both ways): each labelled duplicate's partner must be its nearest among every
    # text of the batch, the other pairs' texts serving as negatives. 0: off. Left off: weight 1 moved accuracy on
    # pool pairs outside 200 labels by +0.0 on the mean of 18 set-seeds (5 better, 8 worse; docs/benchmarks.md).
    in_batch: float = 0.0
    # Added to the loss with this weight: the squared distance of the trained weights from the pretrained ones
    # (L2-SP, a pull towards the pretrained model; pair it with weight_decay=0). 0: off. Left off: weights 0.01 / 0.1 /
    # 1 moved accuracy on pool pairs outside 200 labels by +0.1 / +0.2 / +0.0 point on the mean of 12 set-seeds
    # (0.1: 6 better, 3 worse, all within 1.1 point; docs/benchmarks.md).
    pull: float = 0.0
    warmup: float = 0.1
    weight_decay: float = 0.01
    seed: int = 0
    metric: str = "accuracy"  # what the threshold maximises
    device: str = "auto"
    # Above HOLDOUT_ABOVE labels, train again on every label once the held-out quarter chose the epoch? Off:
    # on pool pairs outside 1,000 labels (5 sets) it ranked better (ROC-AUC +0.1 to +1.0) but its hedged
    # threshold was no more accurate (mean -0.1 point), for ~80% more time (docs/benchmarks.md).
    refit: bool = False


def answered_both_ways(pairs: Pairs) -> list[tuple[str, str]]:
    """The text pairs (either order) labelled both duplicate and not duplicate among ``pairs``."""
    answers: dict[tuple[str, str], set[int]] = {}
    for t1, t2, y in zip(pairs.text1, pairs.text2, pairs.labels):
        answers.setdefault((t1, t2) if t1 <= t2 else (t2, t1), set()).add(int(y))
    return [key for key, ys in answers.items() if len(ys) > 1]


def check_labels(pairs: Pairs) -> None:
    """Refuse labels the recipe cannot learn from, in one line saying what to add or fix:
    too few pairs, too few of one kind, or one pair answered both ways."""
    where = pairs.source or "the labels"
    both = answered_both_ways(pairs)
    if both:
        a, b = both[0]
        raise DataError(
            f"{where}: {len(both)} pair(s) are labelled both duplicate and not duplicate, e.g. {a[:60]!r} / "
            f"{b[:60]!r}; keep one answer per pair"
        )
    pos = int((pairs.labels == 1).sum())
    neg = len(pairs) - pos
    more_pos, more_neg = max(0, MIN_EACH - pos), max(0, MIN_EACH - neg)
    short = max(0, MIN_LABELS - len(pairs) - more_pos - more_neg)
    if more_pos or more_neg or short:
        wanted = [f"{more_pos} more duplicate(s)"] * bool(more_pos) + [f"{more_neg} more non-duplicate(s)"] * bool(
            more_neg
        )
        wanted += [f"{short} more pair(s) of either kind"] * bool(short)
        raise DataError(
            f"{where}: {len(pairs)} labelled pairs ({pos} duplicates, {neg} not); learning from labels needs at "
            f"least {MIN_LABELS} with {MIN_EACH} of each kind: label {' and '.join(wanted)}"
        )


# -- the trainable top of the encoder ----------------------------------------------------------------------------


def _capped_batches(order: np.ndarray, lengths: list[int], batch: int, tokens: int):
    """``order`` (texts by ascending length) cut into batches of up to ``batch`` texts and ``tokens``
    padded tokens: the attention of 32 texts of 256 tokens alone is ~0.1 GB a layer, and the
    allocator keeps what it once held."""
    start = 0
    while start < len(order):
        rows = order[start : start + batch]
        while len(rows) > 1 and len(rows) * lengths[rows[-1]] > tokens:  # the last is the longest
            rows = rows[:-1]
        start += len(rows)
        yield rows


TRAINABLE = "BERT-family encoders such as minilm, and MPNet such as mpnet"  # what trainable_network covers


def trainable_network(hf_config: dict) -> type[Any] | None:  # Bert or MPNet
    """The plain-PyTorch network whose top layers the recipe trains for this transformer (None: none fits)."""
    from ..models.encoders import bert, mpnet

    for fits, network in ((bert.supports, bert.Bert), (mpnet.supports, mpnet.MPNet)):
        if fits(hf_config):
            return network
    return None


class _Tower:
    """The pretrained encoder split at ``frozen`` layers: the frozen bottom run once per text
    (:meth:`states`), the top trained on those states (:meth:`top`), and written back (:meth:`write_back`)."""

    def __init__(self, model: SiameseModel, frozen: int | None, device: torch.device, precision: str):
        from ..models.encoders import TransformerEncoder

        encoder = model.encoder
        if not isinstance(encoder, TransformerEncoder) or model.config.head != "cosine":
            raise ConfigError(
                f"--from takes a pretrained transformer (minilm, mpnet, a sentence-transformers folder) or a Siamese "
                f"transformer model folder; this one has the {model.config.encoder} encoder and "
                f"{model.config.head} head"
            )
        network = trainable_network(encoder.hf_config)
        if network is None:
            raise ConfigError(
                f"--from: a {encoder.hf_config.get('model_type')!r} transformer cannot be fine-tuned by this recipe "
                f"yet (it trains {TRAINABLE})"
            )
        self.net = network(encoder.hf_config, pooler=False)
        # assign: the frozen network shares the encoder's tensors (mpnet: 0.44 GB not copied); top() trains copies
        missing, _ = self.net.load_state_dict(encoder.model.state_dict(), strict=False, assign=True)
        if missing:
            raise ModelError(f"--from: the encoder's weights lack {missing[0]}")
        layers = len(self.net.encoder.layer)
        self.frozen = layers // 2 if frozen is None else frozen
        if not 0 <= self.frozen < layers:
            raise ConfigError(
                f"--frozen-layers {self.frozen}: this encoder has {layers} layers; freeze 0 to {layers - 1}"
            )
        self.pooling = encoder.pooling if encoder.pooling in ("mean", "cls") else "mean"
        self.net.eval().to(device)
        self.device, self.cast = device, _autocast(precision, device)

    @torch.no_grad()
    def states(self, ids: list[np.ndarray], batch: int = 32, bar=None) -> tuple[list[torch.Tensor], np.ndarray]:
        """Per text: its hidden states after the frozen layers (bf16, CPU) and its pretrained unit vector."""
        from ..data.vocabulary import pad

        order = np.argsort([len(s) for s in ids], kind="stable")
        vectors = np.zeros((len(ids), self.net.config.hidden_size), np.float32)
        states: list[torch.Tensor] = [torch.empty(0)] * len(ids)
        for rows in _capped_batches(order, [len(s) for s in ids], batch, STATES_TOKENS):
            padded, sizes = pad([ids[i] for i in rows], 0)
            x_ids, lengths = torch.from_numpy(padded).to(self.device), torch.from_numpy(sizes).to(self.device)
            mask = torch.arange(x_ids.shape[1], device=self.device)[None, :] < lengths[:, None]
            keep = self.net.attention_mask(mask)
            with self.cast():
                x = self.net.embeddings(x_ids)
                for k, layer in enumerate(self.net.encoder.layer):
                    if k == self.frozen:
                        kept = x.to(torch.bfloat16).cpu()
                        for j, r in enumerate(rows):
                            states[r] = kept[j, : len(ids[r])].clone()
                    x = layer(x, keep)
            vectors[rows] = self._pool(x, mask).cpu().numpy()
            if bar is not None:
                bar.update(len(rows))
        return states, vectors

    def _pool(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if self.pooling == "cls":
            return F.normalize(x[:, 0].float(), dim=-1)
        m = mask.unsqueeze(-1).float()
        return F.normalize((x.float() * m).sum(1) / m.sum(1).clamp(min=1), dim=-1)

    def top(self) -> _Top:
        """A fresh trainable copy of the layers above the frozen ones."""
        return _Top(self, copy.deepcopy(list(self.net.encoder.layer)[self.frozen :]))

    def write_back(self, top: _Top, model: SiameseModel) -> None:
        """The trained top layers into ``model``'s encoder (the same parameter names as BertModel's / MPNetModel's).
        The tower's own network shares those tensors, so it changes too: the last call on a tower."""
        state = {
            f"encoder.layer.{self.frozen + i}.{name}": t.detach().cpu()
            for i, layer in enumerate(top.layers)
            for name, t in layer.state_dict().items()
        }
        net: torch.nn.Module = model.encoder.model  # type: ignore[assignment]  # a transformer encoder's network
        missing = set(state) - set(net.state_dict())
        if missing:
            raise ModelError(f"--from: the encoder has no parameter {sorted(missing)[0]}")
        net.load_state_dict(state, strict=False)


class _Top(torch.nn.Module):
    """The trainable layers on cached states → pooled unit vectors."""

    def __init__(self, tower: _Tower, layers: list):
        super().__init__()
        self.tower = [tower]  # not a submodule: its frozen network is not trained
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, states: list[torch.Tensor]) -> torch.Tensor:
        tower = self.tower[0]
        width = max(len(s) for s in states)
        x = torch.zeros(len(states), width, states[0].shape[-1], dtype=torch.float32)
        mask = torch.zeros(len(states), width, dtype=torch.bool)
        for i, s in enumerate(states):
            x[i, : len(s)] = s.float()
            mask[i, : len(s)] = True
        x, mask = x.to(tower.device), mask.to(tower.device)
        with torch.no_grad():  # MPNet's position bias: the frozen network's, not trained
            keep = tower.net.attention_mask(mask)
        # Long texts: each layer's activations are recomputed in the backward pass instead of kept (a
        # batch of 256-token texts holds ~0.3 GB per layer; the recompute costs a forward pass).
        recompute = self.training and torch.is_grad_enabled() and width > RECOMPUTE_ABOVE
        with tower.cast():
            for layer in self.layers:
                x = checkpoint(layer, x, keep, use_reentrant=False) if recompute else layer(x, keep)
        return tower._pool(x, mask)

    @torch.no_grad()
    def cosines(self, states: list[torch.Tensor], a: np.ndarray, b: np.ndarray, batch: int = 64) -> np.ndarray:
        """The cosine of each pair of text indices (a[i], b[i])."""
        self.eval()
        texts = np.unique(np.concatenate([a, b]))
        texts = texts[np.argsort([len(states[i]) for i in texts], kind="stable")]
        vectors: dict[int, np.ndarray] = {}
        for rows in _capped_batches(texts, [len(s) for s in states], batch, 2 * STATES_TOKENS):
            for r, v in zip(rows, self([states[i] for i in rows]).float().cpu().numpy()):
                vectors[int(r)] = v
        return np.array([float(vectors[i] @ vectors[j]) for i, j in zip(a, b)], dtype=np.float64)


def _autocast(precision: str, device: torch.device):
    from ..runtime.precision import autocast

    return autocast(precision, device.type)


def _cosent(cos: torch.Tensor, y: torch.Tensor, scale: float) -> torch.Tensor:
    """CoSENT: every (duplicate, non-duplicate) pair of the batch ordered by cosine, softly."""
    s = scale * cos
    ordered = y[:, None] > y[None, :]
    diff = (s[None, :] - s[:, None]).masked_fill(~ordered, float("-inf"))
    return torch.logsumexp(torch.cat([s.new_zeros(1), diff.flatten()]), 0)


def _online_contrastive(cos: torch.Tensor, y: torch.Tensor, margin: float = 0.5) -> torch.Tensor:
    """sentence-transformers' OnlineContrastiveLoss on cosine distances: the duplicates farther apart than
    the batch's closest non-duplicate, squared, plus the non-duplicates closer than its farthest
    duplicate, squared short of ``margin`` (a batch of one kind compares with its own mean, as there)."""
    d = 1 - cos.float()
    pos, neg = d[y > 0.5], d[y <= 0.5]
    hard_neg = neg[neg < (pos.max() if len(pos) else neg.mean())]
    hard_pos = pos[pos > (neg.min() if len(neg) else pos.mean())]
    return hard_pos.pow(2).sum() + F.relu(margin - hard_neg).pow(2).sum()


def _in_batch(v: torch.Tensor, ids: np.ndarray, y: torch.Tensor, scale: float) -> torch.Tensor:
    """The in-batch term: for each duplicate pair (a_i, b_i) of the batch, cross-entropy of a_i's scaled cosines
    to the batch's 2n texts with b_i the answer, and the same from b_i; the anchor itself and other copies of
    either text are left out. ``v``: the n a-vectors then the n b-vectors; ``ids``: their text indices."""
    n = len(ids) // 2
    dup = torch.nonzero(y > 0.5).flatten()
    if len(dup) == 0:
        return v.new_zeros(())
    anchors = torch.cat([dup, dup + n])
    answers = torch.cat([dup + n, dup])
    logits = scale * (v[anchors].float() @ v.float().T)
    t = torch.as_tensor(ids, device=v.device)
    same = (t[None, :] == t[anchors][:, None]) | (t[None, :] == t[answers][:, None])
    same[torch.arange(len(anchors)), answers] = False
    return F.cross_entropy(logits.masked_fill(same, float("-inf")), answers)


def fine_tune(tower: _Tower, states, a, b, y, options: LearnOptions, epochs: int, on_epoch=None, bar=None) -> _Top:
    """A fresh top trained on pairs of text indices ``(a[i], b[i])`` labelled ``y`` for ``epochs``
    epochs of a schedule of ``options.epochs`` (warm-up, linear decay); ``on_epoch(top, epoch)``
    after each epoch."""
    torch.manual_seed(options.seed)
    rng = np.random.default_rng(options.seed)
    top = tower.top()
    params = list(top.parameters())
    start = [p.detach().clone() for p in params] if options.pull else []
    groups = [
        {"params": [p for p in params if p.ndim > 1], "weight_decay": options.weight_decay},
        {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0},
    ]
    # fused: one kernel for every tensor's update (a sixth of the step's time on 2 cores, unfused)
    opt = torch.optim.AdamW(groups, lr=options.lr, fused=True)
    labels = torch.as_tensor(np.asarray(y, np.float32), device=tower.device)
    n, size = len(y), options.batch_size
    total = options.epochs * math.ceil(n / size)
    warm = int(options.warmup * total)
    step = 0
    lengths = np.array([max(len(states[i]), len(states[j])) for i, j in zip(a, b)])
    for epoch in range(1, epochs + 1):
        top.train()
        for rows in _batches(rng, lengths, size):
            if len(rows) >= 2:
                factor = (step + 1) / (warm + 1) if step < warm else max(0.0, (total - step) / max(1, total - warm))
                for g in opt.param_groups:
                    g["lr"] = options.lr * factor
                v = top([states[i] for i in a[rows]] + [states[i] for i in b[rows]])
                cos = (v[: len(rows)] * v[len(rows) :]).sum(-1)
                loss = _cosent(cos, labels[rows], options.scale)
                if options.contrastive:
                    loss = loss + options.contrastive * _online_contrastive(cos, labels[rows])
                if options.in_batch:
                    ids = np.concatenate([a[rows], b[rows]])
                    loss = loss + options.in_batch * _in_batch(v, ids, labels[rows], options.scale)
                if options.pull:
                    loss = loss + options.pull * sum(((p - p0) ** 2).sum() for p, p0 in zip(params, start))
                opt.zero_grad(set_to_none=True)
                loss.backward()
                torch.nn.utils.clip_grad_norm_(params, 1.0)
                opt.step()
            step += 1
            if bar is not None:
                bar.update(len(rows))
        if on_epoch is not None:
            on_epoch(top, epoch)
    top.eval()
    return top


def _batches(rng: np.random.Generator, lengths: np.ndarray, size: int, window: int = 8) -> list[np.ndarray]:
    """Shuffled batches of similar lengths: the shuffled pairs cut into windows of ``window``
    batches, each sorted by length before it is cut (less padding: ~1.5x faster on varied
    lengths), and the batches shuffled."""
    perm = rng.permutation(len(lengths))
    out = []
    for start in range(0, len(perm), size * window):
        chunk = perm[start : start + size * window]
        chunk = chunk[np.argsort(lengths[chunk], kind="stable")]
        out += [chunk[k : k + size] for k in range(0, len(chunk), size)]
    return [out[i] for i in rng.permutation(len(out))]


# -- cross-validation ------------------------------------------------------------------------------------------


def _auc(scores: np.ndarray, y: np.ndarray) -> float | None:
    from sklearn.metrics import roc_auc_score

    return float(roc_auc_score(y, scores)) if len(set(y.tolist())) == 2 else None


def _folds(groups: np.ndarray, y: np.ndarray, k: int, seed: int) -> tuple[list[np.ndarray], str]:
    """Grouped folds, or stratified random ones when the pairs form too few groups to fill ``k``."""
    if len(np.unique(groups)) >= 2 * k:
        return grouped_folds(groups, k, seed=seed), "grouped"
    rng = np.random.default_rng(seed)
    folds: list[list[int]] = [[] for _ in range(k)]
    for label in (0, 1):
        for i, row in enumerate(rng.permutation(np.flatnonzero(y == label))):
            folds[i % k].append(int(row))
    return [np.sort(np.array(f)) for f in folds if f], "random (the pairs form too few connected groups)"


def threshold_accuracy(scores: np.ndarray, y: np.ndarray, folds: list[np.ndarray], metric: str) -> float:
    """The accuracy of a threshold fitted on the other folds, over every fold's pairs."""
    from ..decision.threshold import choose_threshold

    right = 0
    for f in folds:
        rest = np.setdiff1d(np.arange(len(y)), f)
        if len(set(y[rest].tolist())) < 2:
            right += int((y[f] == round(float(y[rest].mean()))).sum())
            continue
        t, _ = choose_threshold(scores[rest], y[rest], metric)
        right += int(((scores[f] > t) == (y[f] == 1)).sum())
    return right / len(y)


def _fold_auc(scores: np.ndarray, y: np.ndarray, folds: list[np.ndarray]) -> float:
    """Mean ROC-AUC over the folds that hold both labels (0 if none does)."""
    per = [p for p in (_auc(scores[f], y[f]) for f in folds) if p is not None]
    return float(np.mean(per)) if per else 0.0


def _best_epoch(held: dict[int, np.ndarray], y: np.ndarray, folds: list[np.ndarray]) -> tuple[int, dict]:
    """The epoch whose held-out cosines rank best (mean ROC-AUC over the folds; fewer epochs on a tie)."""
    aucs = {epoch: _fold_auc(scores, y, folds) for epoch, scores in held.items()}
    return max(aucs, key=lambda e: (round(aucs[e], 6), -e)), aucs


def _cross_validate(tower, states, a, b, y, groups, options, bar) -> dict:
    """Held-out cosines of the fine-tune per epoch: K grouped folds, or one grouped quarter held out
    (then the model trained on the rest, at each epoch, is kept for the final one)."""
    n = len(y)
    if n > HOLDOUT_ABOVE:
        folds, how = _folds(groups, y, round(1 / HOLDOUT_SHARE), options.seed)
        held_rows, plan = folds[0], f"one {how} quarter held out ({len(folds[0])} pairs)"
        rest = np.setdiff1d(np.arange(n), held_rows)
        held: dict[int, np.ndarray] = {}
        snapshots: dict[int, dict] = {}

        def keep(top, epoch):
            held[epoch] = top.cosines(states, a[held_rows], b[held_rows])
            if not options.refit:
                snapshots[epoch] = copy.deepcopy(top.state_dict())

        top = fine_tune(tower, states, a[rest], b[rest], y[rest], options, options.epochs, keep, bar)
        return {
            "plan": plan,
            "rows": held_rows,
            "groups": groups[held_rows],
            "held": held,
            "top": top,
            "snapshots": snapshots,
        }
    folds, how = _folds(groups, y, FOLDS, options.seed)
    held = {e: np.zeros(n) for e in range(1, options.epochs + 1)}
    for f in folds:
        rest = np.setdiff1d(np.arange(n), f)

        def score(top, epoch, f=f):
            held[epoch][f] = top.cosines(states, a[f], b[f])

        fine_tune(tower, states, a[rest], b[rest], y[rest], options, options.epochs, score, bar)
    return {"plan": f"{len(folds)} {how} folds", "rows": np.arange(n), "held": held, "folds": folds}


# -- the whole recipe ------------------------------------------------------------------------------------------


def learn(
    pairs: PairsLike,
    source: str | os.PathLike = "minilm",
    *,
    options: LearnOptions | None = None,
    progress: bool = True,
):
    """A Siamese model learned from labelled ``pairs`` starting from ``source`` (``minilm``,
    ``mpnet``, a sentence-transformers folder or a Siamese transformer model folder), never worse
    by cross-validation than ``source`` as it is with a threshold fitted on the same pairs. Returns
    the model (threshold set; ``info["learned"]`` says what was measured and chosen). ``progress``: lines on stderr
    (bars in a terminal or a notebook), as :func:`siamese.train` writes them; False for silence."""
    from ..io.progress import tqdm
    from ..models.pretrained import CROSS_FORMAT, folder_format, model_folder
    from ..models.sentence_encoder import load_bi_encoder
    from ..runtime.devices import resolve_device
    from ..runtime.memory import map_big_blocks
    from ..runtime.precision import resolve_precision

    options = options or LearnOptions()
    pairs = as_pairs(pairs, "labels")
    check_labels(pairs)
    map_big_blocks()  # activations of a new size every batch: a heap would keep ~0.3 GB more (runtime.memory)
    started = time.perf_counter()
    folder = model_folder(source)
    if folder.is_dir() and folder_format(folder) == CROSS_FORMAT:
        raise ModelError(f"{source}: a cross-encoder has no vectors to fine-tune; --from takes a bi-encoder")
    model = load_bi_encoder(source, device="cpu")
    source_info = {"source": os.fspath(source), "folder": str(folder.resolve()) if folder.exists() else None}
    device = resolve_device(options.device)
    tower = _Tower(model, options.frozen_layers, device, resolve_precision("auto", device))
    texts = sorted(set(pairs.text1) | set(pairs.text2))
    at = {t: i for i, t in enumerate(texts)}
    a = np.array([at[t] for t in pairs.text1])
    b = np.array([at[t] for t in pairs.text2])
    y = np.asarray(pairs.labels, dtype=np.int64)
    with tqdm(total=len(texts), desc="encode the labels' texts", unit="text", disable=not progress) as bar:
        states, vectors = tower.states(model.vectorizer.encode(texts), bar=bar)
    pretrained = np.einsum("ij,ij->i", vectors[a], vectors[b]).astype(np.float64)
    cv_pairs = len(y) * (FOLDS - 1) if len(y) <= HOLDOUT_ABOVE else round(len(y) * (1 - HOLDOUT_SHARE))
    bar = tqdm(total=options.epochs * cv_pairs, desc="fine-tune", unit="pair", disable=not progress)
    cv = _cross_validate(tower, states, a, b, y, pair_groups(pairs.text1, pairs.text2), options, bar)
    bar.close()
    decision = _decide(cv, pretrained, y, options)
    if decision["chosen"] == "fine-tuned":
        top = cv.get("top")
        if top is not None and not options.refit:  # held-out plan: the model trained on the rest, at the chosen epoch
            top.load_state_dict(cv["snapshots"][decision["epoch"]])
            decision["final_fit_labels"] = len(y) - len(cv["rows"])
        else:
            bar = tqdm(total=decision["epoch"] * len(y), desc="final fit", unit="pair", disable=not progress)
            top = fine_tune(tower, states, a, b, y, options, decision["epoch"], bar=bar)
            bar.close()
            _hedge_threshold(decision, top.cosines(states, a, b), y, options.metric)
            decision["final_fit_labels"] = len(y)
        tower.write_back(top, model)
        model.config = replace(model.config, loss="cosent")  # config.json names the loss these weights learned by
    model.calibrator, calibration = _calibrate(decision, cv, pretrained, y, pairs, options)
    model.set_threshold(decision.pop("threshold"))
    model.info["pretrained"] = source_info
    model.info["learned"] = {
        "source": str(source),
        "labels": len(y),
        "duplicates": int(y.sum()),
        "plan": cv["plan"],
        "frozen_layers": tower.frozen,
        "loss": "cosent",
        "lr": options.lr,
        "batch_size": options.batch_size,
        "max_epochs": options.epochs,
        **decision,
        "calibration": calibration,
        "seconds": round(time.perf_counter() - started, 1),
    }
    return model.to(options.device)


def _decide(cv: dict, pretrained: np.ndarray, y: np.ndarray, options: LearnOptions) -> dict:
    """As-is or fine-tuned: the fine-tune if its held-out cosines beat the pretrained ones on the
    accuracy of a cross-validated threshold, or on ROC-AUC by :data:`AUC_MARGIN` (both over the
    same folds); the threshold of the one kept, and what was measured."""
    from ..decision.threshold import choose_threshold, fit_threshold

    rows = cv["rows"]
    yh = y[rows]
    folds = cv.get("folds") or _folds(cv["groups"], yh, 5, options.seed + 1)[0]
    epoch, aucs = _best_epoch(cv["held"], yh, folds)
    tuned = cv["held"][epoch]
    measured = {
        "as_is": {
            "accuracy": threshold_accuracy(pretrained[rows], yh, folds, options.metric),
            "roc_auc": _fold_auc(pretrained[rows], yh, folds),  # as the fine-tune's: mean over the folds
        },
        "fine_tuned": {"accuracy": threshold_accuracy(tuned, yh, folds, options.metric), "roc_auc": aucs[epoch]},
    }
    tuned_m, as_is_m = measured["fine_tuned"], measured["as_is"]
    better = tuned_m["accuracy"] > as_is_m["accuracy"] or tuned_m["roc_auc"] > as_is_m["roc_auc"] + AUC_MARGIN
    scores = tuned if better else pretrained
    # kept as it is: the threshold to decide new pairs by from these labels (a Platt fit's cut: more
    # accurate than the labels' best cut on pool pairs outside them). Fine-tuned on K folds: the best cut
    # of the held-out cosines, hedged after the final fit (a Platt cut in every step was no better on pool
    # pairs: SICK -0.2, MSRP 0.0, PAWS-QQP -0.4 at 200 labels, seed 0). Fine-tuned with one held-out
    # quarter: its Platt cut, as steady as ~250 pairs allow (their best cut jumped along a flat top: on
    # pool pairs outside 1,000 labels the Platt cut was +0.23 point on average over 23 runs of 5 sets;
    # docs/benchmarks.md)
    if not better:
        threshold, found = fit_threshold(scores, y, options.metric)
    elif "folds" in cv:
        threshold, found = choose_threshold(scores, yh, options.metric)
    else:
        threshold, found = fit_threshold(scores, yh, options.metric)
    return {
        "chosen": "fine-tuned" if better else "as-is",
        "epoch": epoch,
        "epoch_roc_auc": {str(e): round(v, 4) for e, v in aucs.items()},
        "cross_validation": measured,
        "held_out_pairs": len(rows),
        "threshold": threshold,
        "threshold_choice": {
            "metric": found["metric"],
            "value": found["value"],
            "rule": found.get("rule", "best cut"),
            "chosen_on": ["held-out cosines of the labels" if better else "the labels"],
            "val_pairs": len(rows) if better else len(y),
        },
    }


def _calibrate(decision: dict, cv: dict, pretrained: np.ndarray, y: np.ndarray, pairs: Pairs, options: LearnOptions):
    """``probability`` for the model kept, fitted (:func:`~siamese.decision.calibration.fit_calibrator`) on
    similarities of labels it was not trained on: MiniLM as it is on every label, or a fine-tune kept from the
    held-out plan on its held-out quarter. A fine-tune trained on every label (the K-fold plan, ``refit``) has no
    such similarities of its own (the folds' come from other models), so it stays uncalibrated, and says why.
    Returns (the calibrator or None, what ``info`` records)."""
    from ..decision.calibration import data_record, fit_calibrator

    if decision["chosen"] == "as-is":
        scores, labels, split = pretrained, y, "all of them (the model was not trained on them)"
    elif cv.get("top") is not None and not options.refit:  # the held-out plan's model, kept as trained
        scores, labels, split = cv["held"][decision["epoch"]], y[cv["rows"]], "the held-out quarter"
    else:
        note = "not calibrated: the model was trained on every label, so none is left to calibrate it on"
        return None, {"fitted": False, "note": note}
    try:
        calibrator = fit_calibrator(scores, labels, seed=options.seed)
    except DataError as e:  # fewer than 2 of a kind in the held-out quarter
        return None, {"fitted": False, "note": f"not calibrated: {e}"}
    fitted_on = {**data_record(pairs), "pairs": len(labels), "split": split}
    calibrator = replace(calibrator, fitted_on=fitted_on)
    return calibrator, {"fitted": True, "method": calibrator.method, "pairs": len(labels), "split": split}


def _hedge_threshold(decision: dict, own: np.ndarray, y: np.ndarray, metric: str) -> None:
    """The final model (K folds plan) is trained on every label for more steps than the fold models
    whose held-out cosines chose the threshold, so its cosines sit higher; its own cosines of the
    labels are flattered by training on them. The threshold kept is the midpoint of the two choices
    (on pool pairs outside the labels of five sets, 0.4 points above either alone on average,
    docs/benchmarks.md); both are recorded."""
    from ..decision.threshold import choose_threshold

    held_out = decision["threshold"]
    trained_on, _ = choose_threshold(own, y, metric)
    decision["threshold"] = (held_out + trained_on) / 2
    decision["threshold_choice"].update(
        chosen_on=["midpoint of the held-out cosines' and the final model's own cosines of the labels' thresholds"],
        held_out_threshold=held_out,
        own_threshold=trained_on,
    )


def learned_line(info: dict) -> str:
    """One line: what cross-validation measured and what was kept."""
    cv = info["cross_validation"]
    asis, tuned = cv["as_is"]["accuracy"], cv["fine_tuned"]["accuracy"]
    auc_asis, auc_tuned = cv["as_is"].get("roc_auc"), cv["fine_tuned"].get("roc_auc")
    ranking = f"; ROC-AUC {auc_asis:.3f}, {auc_tuned:.3f}" if auc_asis is not None and auc_tuned is not None else ""
    measured = f"cross-validated accuracy as-is {asis:.3f}, fine-tuned {tuned:.3f}{ranking} ({info['plan']})"
    if info["chosen"] == "fine-tuned":
        epochs = f"{info['epoch']} epoch{'s' * (info['epoch'] != 1)}"
        return f"fine-tuned {info['source']} on {info['labels']:,} labels for {epochs}: {measured}"
    return (
        f"kept {info['source']} as it is, with its threshold set on the {info['labels']:,} labels: fine-tuning did "
        f"not beat it in accuracy, nor in ranking by {AUC_MARGIN} ({measured})"
    )


def probability_line(info: dict) -> str:
    """One line: what the probability is calibrated on, or why it is not."""
    calibrated = info["calibration"]
    if not calibrated["fitted"]:
        return f"probability: {calibrated['note']}"
    return f"probability: {calibrated['method']} calibration on {calibrated['pairs']:,} labels, {calibrated['split']}"


def threshold_note(info: dict) -> str:
    """How the threshold kept was chosen, in a few words: ``threshold 0.661 (NOTE)``."""
    choice = info["threshold_choice"]
    pairs = choice.get("val_pairs") or info["labels"]
    if "own_threshold" in choice:
        return f"midway between the best cuts of the held-out and the final model's cosines of the {pairs} labels"
    how = "where a logistic fit crosses 1/2" if choice.get("rule") == "platt" else "the most accurate cut"
    held = "held-out " if info["chosen"] == "fine-tuned" else ""
    return f"{how}, on the cosines of {pairs} {held}labels"
