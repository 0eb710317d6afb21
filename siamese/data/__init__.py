"""What a model reads: labelled pairs in the common formats, plain text files and records,
answer-selection sets, the shared public data sets, the word vocabulary and GloVe vectors.

- :mod:`.pairs`: :class:`Pairs`, the pair formats, :func:`read_pairs`, :func:`split_pairs`
- :mod:`.groups`: connected groups of the pair graph; splits and folds that keep each group on one side
- :mod:`.input_files`: opening a user's file and reading its CSV/TSV rows strictly
- :mod:`.records`: texts with ids and other columns (what dedupe reads)
- :mod:`.answers`: answer-selection sets (TrecQA, WikiQA), triplets, MAP/MRR
- :mod:`.datasets`: the shared public pair sets by name (``$SIAMESE_DATA``)
- :mod:`.vocabulary`: the word vocabulary (``tokenizer.json``) and padding
- :mod:`.glove`: GloVe word vectors for an embedding's start"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    globals(),
    {
        "FORMATS": ".pairs",
        "Pairs": ".pairs",
        "read_pairs": ".pairs",
        "read_texts": ".pairs",
        "split_pairs": ".pairs",
    },
)
