"""A saved emoji model is a folder: ``config.json`` (architecture + training summary) and
``model.safetensors`` (weights and buffers), plus any extra files (``tokenizer.json``).
Written atomically (a temporary folder renamed into place); read without unpickling anything."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, fields
from pathlib import Path

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file

from ..errors import ModelError
from ..io.atomic import atomic_dir
from ..io.manifest import read_manifest
from ..version import __version__

WEIGHTS = "model.safetensors"


def save_folder(
    path: str | os.PathLike,
    *,
    fmt: str,
    config,
    module: torch.nn.Module,
    info: dict,
    extra: dict | None = None,
    write_files: Callable[[Path], None] | None = None,
    overwrite: bool = False,
) -> Path:
    """Write ``config`` (a dataclass), ``extra`` JSON fields, ``info`` and the module's weights."""
    path = Path(path)
    with atomic_dir(path, overwrite=overwrite, kind="model") as tmp:
        manifest = {"format": fmt, "siamese_version": __version__, **asdict(config), **(extra or {}), "info": info}
        (tmp / "config.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        state = {k: v.detach().contiguous() for k, v in module.state_dict().items()}
        save_file(state, str(tmp / WEIGHTS), metadata={"format": fmt})
        if write_files is not None:
            write_files(tmp)
    return path


def read_config(path: str | os.PathLike, *, fmt: str, config_class, what: str):
    """``(config dataclass, raw config.json dict)``; a one-line ModelError if anything is off."""
    path = Path(path)
    raw = read_manifest(path, "config.json", fmt, ModelError, what)
    known = {f.name for f in fields(config_class)}
    try:
        config = config_class(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items() if k in known})
    except (TypeError, ValueError) as e:
        raise ModelError(f"{path / 'config.json'}: invalid field ({e})") from None
    return config, raw


def load_weights(path: str | os.PathLike, module: torch.nn.Module) -> torch.nn.Module:
    file = Path(path) / WEIGHTS
    if not file.is_file():
        raise ModelError(f"{path}: model folder is missing {WEIGHTS}")
    try:
        module.load_state_dict(load_file(str(file)))
    except (RuntimeError, OSError, SafetensorError) as e:
        raise ModelError(f"{file}: weights do not fit the config ({str(e).splitlines()[0]})") from None
    return module.eval()
