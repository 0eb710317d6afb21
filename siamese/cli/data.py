"""``siamese formats``: the pair file formats the commands read."""

from __future__ import annotations

from .common import JsonOpt, emit

# Detected besides the named formats (siamese.data.pairs.pair_columns)
OTHER_HEADERS = (
    "a header naming the texts text_a/text_b, sentence_1/sentence_2, question1/question2, ... "
    "(any case, separator) with a label, is_duplicate or paraphrase column"
)


def formats(as_json: JsonOpt = False):
    """List the pair formats the readers understand."""
    from ..data.pairs import FORMATS

    result = {
        "formats": [
            {
                "name": f.name,
                "text1": f.text1,
                "text2": f.text2,
                "label": f.label,
                "score": f.score,
                "delimiter": f.delimiter,
                "header": f.columns is None,
                "description": f.description,
            }
            for f in FORMATS.values()
        ],
        "also_detected": OTHER_HEADERS,
    }
    lines = [f"{f.name:<12} {f.description}" for f in FORMATS.values()] + [f"{'(auto)':<12} also {OTHER_HEADERS}"]
    emit(result, as_json, lines)
