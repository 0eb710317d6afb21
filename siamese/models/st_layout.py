"""The sentence-transformers folder layout, read and written.

Reading (:func:`read_layout`): what a sentence-transformers folder declares in ``modules.json`` —
where its Hugging Face model lies (the Transformer module's path: ``""``, the folder itself, or a
subfolder such as ``0_Transformer``), its pooling (mean or [CLS]), whether it normalises, and how
many tokens it keeps (``max_seq_length``, or the tokenizer's ``model_max_length``). Modules we
would not reproduce (Dense, max pooling, ...) are refused. A plain
Hugging Face folder (no ``modules.json``) is mean-pooled.

Writing (:func:`write_layout`): a Siamese model with a transformer encoder is also a
sentence-transformers folder, so ``SentenceTransformer(folder)`` gives the same vectors::

    config.json, tokenizer.json        ours (siamese-model/1), as for every encoder
    model.safetensors                  ours: the head's weights only (none for cosine)
    0_Transformer/                     a Hugging Face model folder: config.json (the model's own),
                                       model.safetensors (the encoder's weights, under Hugging
                                       Face's names), tokenizer.json, tokenizer_config.json,
                                       sentence_bert_config.json
    1_Pooling/config.json              mean or cls
    modules.json                       Transformer -> Pooling (-> Normalize, for unit vectors)
    config_sentence_transformers.json  the similarity function (cosine, manhattan)

Why a subfolder: sentence-transformers reads the Transformer module's folder as a Hugging Face
model folder (its config.json, its weight names), and the root's config.json is ours. The
encoder's weights are stored once, in ``0_Transformer/model.safetensors``, where
:meth:`siamese.models.siamese.SiameseModel.load` reads them; folders written before this layout keep them
in the root's ``model.safetensors`` and load as before. Only ``tokenizer.json`` (<1 MB) is there
twice. HF's ``pooler`` output has no sentence-transformers Pooling mode, so a model pooled that
way gets ``0_Transformer/`` but no ``modules.json``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from safetensors.torch import save_file

from ..errors import ModelError
from ..io.atomic import naming
from ..io.manifest import read_json_object

TRANSFORMER_FOLDER = "0_Transformer"
POOLING_FOLDER = "1_Pooling"
WEIGHTS = "model.safetensors"
# sentence_bert_config.json had per-architecture names in early sentence-transformers releases.
_ST_CONFIGS = (
    "sentence_bert_config.json",
    "sentence_roberta_config.json",
    "sentence_distilbert_config.json",
    "sentence_camembert_config.json",
    "sentence_albert_config.json",
    "sentence_xlm-roberta_config.json",
    "sentence_xlnet_config.json",
)
# Pooling modes we reproduce, by their legacy (pooling_mode_<x>: true) and current (pooling_mode: x) names.
_POOLING = {"mean_tokens": "mean", "mean": "mean", "cls_token": "cls", "cls": "cls"}
_MODULE = "sentence_transformers.models.{}"


@dataclass(frozen=True)
class Layout:
    """What a sentence-transformers (or plain Hugging Face) folder asks for."""

    transformer: Path  # the Hugging Face model folder (config.json, weights, tokenizer.json)
    pooling: str = "mean"  # mean | cls
    normalize: bool = False
    max_seq_length: int | None = None
    modules: tuple[str, ...] = ()  # the module kinds in order; () for a plain Hugging Face folder


def read_layout(folder: Path) -> Layout:
    """The layout ``folder``'s ``modules.json`` declares (a plain Hugging Face folder without one)."""
    folder = Path(folder)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return Layout(folder, max_seq_length=_max_length(folder, {}))
    modules = read_json_object(modules_file, ModelError, "a JSON list of modules", kind=list)
    if not all(isinstance(m, dict) for m in modules):
        raise ModelError(f"{modules_file}: expected a JSON list of modules")
    kinds = tuple(str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules)
    for kind in kinds:
        if kind not in ("Transformer", "Pooling", "Normalize"):
            raise ModelError(
                f"{folder}: sentence-transformers module {kind!r} is not supported "
                "(Transformer, Pooling and Normalize are)"
            )
    if kinds.count("Transformer") != 1 or kinds[0] != "Transformer" or kinds.count("Pooling") != 1:
        raise ModelError(
            f"{modules_file}: expected one Transformer module first and one Pooling module, "
            f"found {', '.join(kinds) or 'none'}"
        )
    transformer = folder / _module_path(modules[0], modules_file)
    pooling = _pooling(folder / _module_path(modules[kinds.index("Pooling")], modules_file) / "config.json", folder)
    settings = next(
        (read_json_object(transformer / name, ModelError) for name in _ST_CONFIGS if (transformer / name).is_file()), {}
    )
    if settings.get("do_lower_case"):
        raise ModelError(
            f"{transformer}: do_lower_case in its sentence-transformers config is not supported "
            "(lowercasing belongs in the tokenizer)"
        )
    return Layout(transformer, pooling, "Normalize" in kinds, _max_length(transformer, settings), kinds)


def _max_length(transformer: Path, settings: dict) -> int | None:
    """Tokens kept per text, as sentence-transformers decides: ``max_seq_length``, else the
    tokenizer's ``model_max_length`` (where sentence-transformers >= 6 keeps it) capped at the
    model's ``max_position_embeddings``; None when neither says."""
    length = settings.get("max_seq_length")
    if length is None:
        tokenizer_config, config = transformer / "tokenizer_config.json", transformer / "config.json"
        length = (
            read_json_object(tokenizer_config, ModelError).get("model_max_length")
            if tokenizer_config.is_file()
            else None
        )
        cap = read_json_object(config, ModelError).get("max_position_embeddings") if config.is_file() else None
        if isinstance(length, int) and isinstance(cap, int) and cap > 0:
            length = min(length, cap)
        if isinstance(length, int) and length > 1_000_000:  # transformers' "no limit" (int(1e30))
            length = None
    if length is not None and (not isinstance(length, int) or isinstance(length, bool) or length < 1):
        raise ModelError(f"{transformer}: max_seq_length must be a whole number >= 1, got {length!r}")
    return length


def _module_path(module: dict, modules_file: Path) -> str:
    """A module's folder, relative to the model folder (nothing outside it)."""
    path = PurePosixPath(str(module.get("path", "")))
    if path.is_absolute() or ".." in path.parts:
        raise ModelError(f"{modules_file}: module path {str(path)!r} leaves the model folder")
    return str(path)


def _pooling(config_file: Path, folder: Path) -> str:
    if not config_file.is_file():
        raise ModelError(f"{folder}: the Pooling module has no {config_file.relative_to(folder)}")
    settings = read_json_object(config_file, ModelError)
    mode = settings.get("pooling_mode")  # sentence-transformers >= 6: a name or a list of names
    if mode is not None:
        modes = {mode} if isinstance(mode, str) else set(map(str, mode))
    else:
        modes = {k.removeprefix("pooling_mode_") for k, v in settings.items() if k.startswith("pooling_mode_") and v}
    found = {_POOLING.get(m) for m in modes}
    if len(modes) != 1 or None in found:
        raise ModelError(f"{folder}: pooling {', '.join(sorted(modes)) or 'none'} is not supported (mean or cls)")
    return found.pop()


def encoder_weights(folder: Path) -> Path | None:
    """A transformer model's encoder weights when saved in this layout; None for older folders."""
    path = Path(folder) / TRANSFORMER_FOLDER / WEIGHTS
    return path if path.is_file() else None


def write_layout(folder: Path, encoder, vectorizer, *, max_length: int | None, head: str) -> None:
    """Write ``encoder`` (a :class:`~siamese.models.encoders.TransformerEncoder`) into ``folder`` as a
    sentence-transformers model: its Hugging Face folder, pooling and modules (see the module doc)."""
    sub = folder / TRANSFORMER_FOLDER
    sub.mkdir()
    (sub / "config.json").write_text(json.dumps(encoder.hf_config, indent=2) + "\n")
    state = {k: v.detach().contiguous() for k, v in encoder.model.state_dict().items()}
    with naming(sub / WEIGHTS):
        save_file(state, str(sub / WEIGHTS), metadata={"format": "pt"})  # "pt": what transformers requires to load it
    with naming(sub / "tokenizer.json"):
        vectorizer.save(sub / "tokenizer.json")
    # The generic fast tokenizer reads tokenizer.json as it is: by model type transformers would
    # pick a class (e.g. RoBERTa's) that may rebuild the tokenizer its own way.
    _write_json(sub / "tokenizer_config.json", {"tokenizer_class": "PreTrainedTokenizerFast"})
    _write_json(sub / "sentence_bert_config.json", {"max_seq_length": max_length, "do_lower_case": False})
    if encoder.pooling not in ("mean", "cls"):
        return
    # The legacy pooling keys: every sentence-transformers release reads them (6.x converts them).
    _write_json(
        folder / POOLING_FOLDER / "config.json",
        {
            "word_embedding_dimension": encoder.dim,
            "pooling_mode_cls_token": encoder.pooling == "cls",
            "pooling_mode_mean_tokens": encoder.pooling == "mean",
            "pooling_mode_max_tokens": False,
            "pooling_mode_mean_sqrt_len_tokens": False,
        },
    )
    modules = [(TRANSFORMER_FOLDER, "Transformer"), (POOLING_FOLDER, "Pooling")]
    if encoder.normalize:
        modules.append(("2_Normalize", "Normalize"))  # no files: the folder need not exist
    _write_json(
        folder / "modules.json",
        [
            {"idx": i, "name": str(i), "path": path, "type": _MODULE.format(kind)}
            for i, (path, kind) in enumerate(modules)
        ],
    )
    if head in ("cosine", "manhattan"):  # what model.similarity_pairwise() ranks by (manhattan: -L1, ours exp(-L1))
        _write_json(folder / "config_sentence_transformers.json", {"similarity_fn_name": head})


def _write_json(path: Path, value) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
