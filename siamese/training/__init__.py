"""Training a model: the entry for every kind (:func:`train`), the epoch loop, batches,
the optimiser, a distillation teacher and TensorBoard logs.

- :mod:`.bi_encoder`: :func:`train` (every kind of model), :func:`prepare`, the Siamese model's steps
- :mod:`.learn`: :func:`learn`, a user's labels learned from a pretrained encoder (``train --from``)
- :mod:`.run`: :func:`train_run`, a training run from files to a model folder (``siamese train``)
- :mod:`.loop`: :class:`Trainer`, the one epoch loop (validation, best weights, checkpoints, resume)
- :mod:`.batches`: length-bucketed, weighted batches; the one seed
- :mod:`.optim`: lazy Adam for sparse embedding gradients
- :mod:`.teacher`: a distillation teacher and its vectors of the training texts
- :mod:`.board`: TensorBoard logs (``--log-dir``)"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "train": ".bi_encoder",
        "prepare": ".bi_encoder",
        "Recipe": ".bi_encoder",
        "ModelConfig": "..config.configs",
        "TrainConfig": "..config.configs",
        "LossConfig": "..config.loss",
    },
)
