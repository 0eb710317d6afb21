"""The models and everything that makes, opens and describes one.

- :mod:`.siamese`: :class:`SiameseModel` (vectorizer + shared encoder + head + threshold), its folder
- :mod:`.inputs`: what its ``encode``, ``similarity`` and ``predict`` accept (texts, vectors, pairs, tables)
- :mod:`.encoders`: one encoder per file, registered in ``ENCODERS``
- :mod:`.losses`: one loss per file, registered in ``LOSSES``
- :mod:`.heads`: the heads scoring a pair of vectors, registered in ``HEADS``
- :mod:`.loading`: open any model folder (a bi-encoder or a cross-encoder)
- :mod:`.pretrained`: pretrained encoders by name (``minilm``, ``mpnet``), offline
- :mod:`.pretrained_folder`: a sentence-transformers or Hugging Face folder built into a model (any model class)
- :mod:`.sentence_encoder`: a pretrained sentence encoder as a Siamese model (:func:`from_pretrained`)
- :mod:`.st_layout`: the sentence-transformers folder layout, read and written
- :mod:`.export`: an ONNX Runtime model folder (``siamese export``)
- :mod:`.card`: the model card (``README.md``) in every model folder
- :mod:`.summary`: a Keras-like summary and a drawing of the architecture"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "SiameseModel": ".siamese",
        "load_model": ".loading",
        "from_pretrained": ".sentence_encoder",
    },
)
