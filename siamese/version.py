"""The installed version, from the package metadata (pyproject.toml is the one place it is written)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "siamese-sim"  # the name on PyPI ("siamese" there is another package); imported as siamese


def _installed() -> str:
    for name in (DISTRIBUTION, "siamese"):  # "siamese": an editable install made before the rename
        try:
            return version(name)
        except PackageNotFoundError:
            continue
    return "0+unknown"  # run from a source tree that was never installed


__version__ = _installed()
