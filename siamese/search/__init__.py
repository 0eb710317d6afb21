"""Duplicate search: a FAISS index of a model's encodings, corpus de-duplication (within a set or
against a reference, saved as a run that can be re-thresholded), retrieval metrics.

Names load on first use (``siamese search`` needs the index, not scipy's graphs for dedupe)."""

from .._lazy import lazy_exports

_WHERE = {
    **dict.fromkeys(["KINDS", "DuplicateIndex", "Hit", "SearchIndexError", "faiss_index", "fill_index"], ".index"),
    "retrieval_metrics": ".metrics",
    **dict.fromkeys(
        [
            "CLUSTERINGS",
            "DuplicatePairs",
            "clusters",
            "communities",
            "components",
            "cross_pairs",
            "duplicate_pairs",
            "vector_index",
        ],
        ".pairs",
    ),
    **dict.fromkeys(["Record", "exact_groups", "normalise", "read_records"], "..data.records"),
    **dict.fromkeys(["Accepted", "Cluster", "DedupeRun", "Duplicate", "Flagged", "dedupe", "dedupe_against"], ".run"),
}
__getattr__, __dir__, __all__ = lazy_exports(globals(), _WHERE)
