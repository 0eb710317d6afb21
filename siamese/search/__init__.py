"""Duplicate search: a FAISS index of a model's encodings, corpus de-duplication, retrieval metrics."""

from .dedupe import CLUSTERINGS, DuplicatePairs, communities, components, dedupe, duplicate_pairs
from .index import KINDS, DuplicateIndex, Hit, SearchIndexError, faiss_index, fill_index
from .metrics import retrieval_metrics

__all__ = ["CLUSTERINGS", "KINDS", "DuplicateIndex", "DuplicatePairs", "Hit", "SearchIndexError", "communities",
           "components", "dedupe", "duplicate_pairs", "faiss_index",
           "fill_index", "retrieval_metrics"]
