"""What every encoder declares and does. Capabilities are class attributes, read by the model and
the trainer instead of probing constructors; tests/test_contracts.py checks each declaration
against the constructor it describes."""

from __future__ import annotations

from torch import nn


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

    def saved_options(self) -> dict:
        """Keywords config.json must keep to rebuild this encoder, beyond the ones it was given."""
        return {}
