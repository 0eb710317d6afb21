"""What every encoder declares and does. Capabilities are class attributes, read by the model and
the trainer instead of probing constructors; tests/config/test_contracts.py checks each declaration
against the constructor it describes."""

from __future__ import annotations

import inspect

from torch import nn

from ...errors import ConfigError

# Constructor keywords the model fills in itself, never options a user sets.
_BUILT_IN = ("vocab_size", "embeddings", "word_counts", "normalize", "char_buckets", "folder")


class Encoder(nn.Module):
    """``forward(ids, lengths) -> (n, dim)``: one vector per text of a padded batch of token ids.

    Hyper-parameters are keyword arguments of ``__init__`` (after ``vocab_size``); ``dim`` is the
    width of the vectors it returns."""

    dim: int
    # The constructor keyword that ModelConfig.dim sets (None: the width is the pretrained model's).
    width_option: str | None = "embedding_dim"
    own_tokenizer = False  # brings its own tokenizer.json instead of a word vocabulary learned from the texts
    pretrained = False  # starts from trained weights (TrainConfig.keep_initial can mix them back in)
    exported = False  # an exported graph opened from its folder (siamese export): inference only
    weights_file = "model.safetensors"  # what SiameseModel.load expects beside config.json
    takes_glove = False  # accepts embeddings= (a GloVe matrix to start from)
    takes_word_counts = False  # accepts word_counts= (corpus frequencies, for SIF weights)
    takes_char_ngrams = False  # accepts char_buckets= (pools character n-grams apart from words)
    default_lr = 1e-3  # Adam's rate when none is given (Keras's default, the recipes' choice)
    bf16_inference = False  # precision "auto" encodes in bf16 on CPUs with native bf16
    length_groups = True  # encoding may split a batch by length across worker threads
    encode_batch_size = 512  # texts per encode() call

    @classmethod
    def check_options(cls, name: str, options: dict) -> None:
        """Refuse an option this encoder does not take, or a value of the wrong kind for its
        default (a number for a number, true/false for a flag, text for text), in one line."""
        params = {k: p for k, p in inspect.signature(cls).parameters.items() if k not in _BUILT_IN}
        for key, value in options.items():
            if key not in params:
                raise ConfigError(f"encoder {name!r} has no option {key!r}; it takes: {', '.join(params)}")
            default = params[key].default
            if default is inspect.Parameter.empty or default is None or value is None:
                continue
            if isinstance(default, bool):
                ok = isinstance(value, bool)
            elif isinstance(default, (int, float)):
                ok = isinstance(value, (int, float)) and not isinstance(value, bool)
                ok = ok and (isinstance(value, int) or not isinstance(default, int) or float(value).is_integer())
            else:
                ok = (
                    isinstance(value, type(default))
                    or isinstance(default, (list, tuple))
                    and isinstance(value, (list, tuple))
                )
            if not ok:
                raise ConfigError(
                    f"encoder {name!r} option {key!r} takes a {type(default).__name__} "
                    f"(default {default!r}), got {value!r}"
                )

    def pool_flat(self, ids, lengths):
        """Vectors of texts whose token ids are concatenated (``ids``: 1-D int64, ``lengths``: one
        count per text, each >= 1), or None if this encoder needs padded batches: an encoder that
        pools tokens without looking at their order can skip padding and length sorting."""
        return None

    def saved_options(self) -> dict:
        """Keywords config.json must keep to rebuild this encoder, beyond the ones it was given."""
        return {}
