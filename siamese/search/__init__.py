"""Duplicate search: a FAISS index of a model's encodings, corpus de-duplication (within a set or
against a reference, saved as a run that can be re-thresholded), retrieval metrics."""

from .index import KINDS, DuplicateIndex, Hit, SearchIndexError, faiss_index, fill_index
from .metrics import retrieval_metrics
from .pairs import (
    CLUSTERINGS,
    DuplicatePairs,
    clusters,
    communities,
    components,
    cross_pairs,
    duplicate_pairs,
    vector_index,
)
from .records import Record, exact_groups, normalise, read_records
from .run import Accepted, Cluster, DedupeRun, Duplicate, Flagged, dedupe, dedupe_against

__all__ = [
    "CLUSTERINGS",
    "KINDS",
    "Accepted",
    "Cluster",
    "DedupeRun",
    "Duplicate",
    "DuplicateIndex",
    "DuplicatePairs",
    "Flagged",
    "Hit",
    "Record",
    "SearchIndexError",
    "clusters",
    "communities",
    "components",
    "cross_pairs",
    "dedupe",
    "dedupe_against",
    "duplicate_pairs",
    "exact_groups",
    "faiss_index",
    "fill_index",
    "normalise",
    "read_records",
    "retrieval_metrics",
    "vector_index",
]
