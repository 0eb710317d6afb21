"""Errors a user can act on: each message is one line naming the file, row or field."""


class SiameseError(Exception):
    """Base class for errors caused by user input (bad data, bad model folder, bad option)."""


class DataError(SiameseError):
    """A data file is missing, malformed, or holds a value we cannot use."""


class ModelError(SiameseError):
    """A model folder is missing, incomplete, or was written by an incompatible version."""


class ConfigError(SiameseError, ValueError):
    """An option or hyper-parameter has a value we do not support."""


class OutputError(SiameseError, OSError):
    """An output cannot be written: a bad path, no permission, a folder that is not ours, a busy lock."""


class SearchIndexError(SiameseError):
    """An index folder is missing, damaged, or belongs to another model."""
