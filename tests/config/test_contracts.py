"""Declared contracts: encoders' capability attributes against their constructors, the CLI's
defaults against the configuration dataclasses, and an import that costs nothing."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import typer
import typer.testing

from siamese.cli import app
from siamese.config.static import StaticConfig
from siamese.data.answers import Triplets
from siamese.data.pairs import Pairs
from siamese.models.encoders import ENCODERS, Encoder
from siamese.models.heads import HEADS, Head, build_head
from siamese.models.siamese import ModelConfig
from siamese.training.bi_encoder import TrainConfig, train


@pytest.mark.parametrize("name", sorted(ENCODERS))
def test_encoder_declares_what_its_constructor_takes(name):
    cls = ENCODERS[name]
    assert issubclass(cls, Encoder)
    params = inspect.signature(cls).parameters
    assert cls.takes_glove == ("embeddings" in params)
    assert cls.takes_word_counts == ("word_counts" in params)
    assert cls.takes_char_ngrams == ("char_buckets" in params)
    assert cls.width_option is None or cls.width_option in params
    assert cls.own_tokenizer or cls.width_option is not None  # a learned vocabulary's width is ours to set
    assert cls.default_lr > 0 and cls.encode_batch_size > 0


def _options(command_name: str) -> dict[str, object]:
    group = typer.main.get_command(app)
    command = group.commands[command_name]
    return {p.name: p.default for p in command.params if p.param_type_name == "option"}


# CLI options whose default differs from the dataclass field of the same name, and why (declared
# with cli_default on the field itself).
DIFFERENT_BY_DESIGN = {
    "loss": "None: triplet, or hinge with --answers",
}


@pytest.mark.parametrize(
    "command, configs",
    [
        ("train", (TrainConfig, ModelConfig)),
        ("distill", (StaticConfig,)),
    ],
)
def test_cli_defaults_agree_with_the_configuration(command, configs):
    options = _options(command)
    checked = 0
    for config in configs:
        for f in dataclasses.fields(config):
            if f.name not in options or f.name in DIFFERENT_BY_DESIGN:
                continue
            default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
            assert options[f.name] == default, (
                f"siamese {command} --{f.name.replace('_', '-')}: {options[f.name]!r} "
                f"!= {config.__name__}.{f.name} = {default!r}"
            )
            checked += 1
    assert checked >= 5


def _declared_commands():
    from siamese.cli.train import DistillCommand, TrainCommand
    from siamese.config.configs import LossConfig
    from siamese.config.run import TrainRun
    from siamese.config.static import DistillRun

    return {
        "train": ((TrainRun, TrainCommand, ModelConfig, TrainConfig), (LossConfig,)),
        "distill": ((DistillRun, StaticConfig, DistillCommand), ()),
    }


@pytest.mark.parametrize("name", ["train", "distill"])
def test_every_option_is_one_declaration(name):
    """siamese train and distill are generated from declared fields: each CLI option is exactly one
    declared field (flag, default, help, bounds from it), and every declared field is an option."""
    from siamese.config.options import declared_options

    configs, nested = _declared_commands()[name]
    command = typer.main.get_command(app).commands[name]
    params = {p.name: p for p in command.params}
    declared = {d.name: d for d in declared_options(*configs)}
    assert sorted(params) == sorted(declared)
    for config in (*configs, *nested):
        for f in dataclasses.fields(config):
            if "option" in f.metadata:
                assert f.name in params, f.name
    for option_name, d in declared.items():
        assert params[option_name].default == d.default, option_name
        if d.option.help:
            assert params[option_name].help == d.option.help, option_name


def test_train_help_lists_the_registries():
    from siamese.models.encoders import ENCODERS
    from siamese.models.heads import HEADS
    from siamese.models.losses import LOSSES

    out = typer.testing.CliRunner().invoke(app, ["train", "--help"], env={"COLUMNS": "2000"}).output
    for registry in (ENCODERS, HEADS, LOSSES):
        assert all(name in out for name in registry)
    assert "0.25 triplet" in out  # the margins come from the loss classes


def test_importing_the_package_and_cli_loads_no_torch_and_changes_only_the_openmp_wait_policy():
    code = (
        "import os, sys; env = dict(os.environ); "
        "import siamese, siamese.cli; from siamese.cli import app; import typer; "
        "typer.main.get_command(app); "
        "assert 'torch' not in sys.modules and 'sklearn' not in sys.modules, 'heavy import'; "
        "assert 'matplotlib' not in sys.modules; "
        "changed = {k: v for k, v in os.environ.items() if env.get(k) != v}; "
        "assert set(env) <= set(os.environ), 'variable removed'; print(siamese.__version__, changed)"
    )
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    for env, changed in ((clean, {"OMP_WAIT_POLICY": "PASSIVE"}), ({**clean, "OMP_WAIT_POLICY": "ACTIVE"}, {})):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
        assert out.returncode == 0, out.stderr
        version, after = out.stdout.split(" ", 1)
        assert version[0].isdigit() and after.strip() == repr(changed)  # a user's own policy wins


def test_the_wait_policy_is_left_alone_when_torch_loaded_first():
    """OpenMP reads it when torch loads: set later, it would only mislead a subprocess's reader."""
    code = "import os, torch, siamese; print(os.environ.get('OMP_WAIT_POLICY'))"
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "None"


@pytest.mark.parametrize("name", sorted(HEADS))
def test_heads_declare_their_family(name):
    head = build_head(name, 8)
    assert isinstance(head, Head)
    a, b = (
        torch.nn.functional.normalize(torch.randn(4, 8), dim=-1),
        torch.nn.functional.normalize(torch.randn(4, 8), dim=-1),
    )
    assert head(a, b).shape == (4,)
    if head.classifier:
        assert any(p.requires_grad for p in head.parameters())
        torch.testing.assert_close(torch.sigmoid(head.logits(a, b)), head(a, b))
        with pytest.raises(TypeError):
            head.matrix(a, b)
    else:
        assert not list(head.parameters())
        torch.testing.assert_close(head.matrix(a, b).diagonal(), head(a, b))


def test_pairs_and_triplets_share_the_training_data_contract():
    pairs = Pairs(["a", "b"], ["c", "d"], np.array([1, 0], dtype=np.int8))
    triplets = Triplets(["q"], ["right"], ["wrong"])
    assert (pairs.triplets, triplets.triplets) == (False, True)
    assert pairs.sides() == [["a", "b"], ["c", "d"]] and triplets.sides() == [["q"], ["right"], ["wrong"]]


def test_encoder_options_are_checked_in_one_place():
    from siamese.errors import ConfigError

    ModelConfig(encoder="bilstm", encoder_options={"hidden": 64, "pooling": "max"}).check()
    with pytest.raises(ConfigError, match="encoder 'bilstm' has no option 'hiden'; it takes: .*hidden"):
        ModelConfig(encoder="bilstm", encoder_options={"hiden": 64}).check()
    with pytest.raises(ConfigError, match="option 'hidden' takes a int"):
        ModelConfig(encoder="bilstm", encoder_options={"hidden": "64"}).check()
    with pytest.raises(ConfigError, match="option 'hidden' takes a int"):
        ModelConfig(encoder="bilstm", encoder_options={"hidden": 6.5}).check()
    with pytest.raises(ConfigError, match="option 'sparse_embedding' takes a bool"):
        ModelConfig(encoder="lstm", encoder_options={"sparse_embedding": 1}).check()
    ModelConfig(encoder="cnn", encoder_options={"kernel_sizes": [2, 3, 4]}).check()


def test_loss_options_are_refused_where_the_loss_has_none():
    from siamese.errors import ConfigError
    from siamese.models.losses import LossConfig, build_loss

    assert build_loss("mnr", LossConfig(scale=30)).scale == 30
    assert build_loss("triplet", LossConfig()).margin == 0.25 and build_loss("triplet", None).scale is None
    with pytest.raises(ConfigError, match="loss 'bce' has no margin"):
        build_loss("bce", LossConfig(margin=0.3))
    with pytest.raises(ConfigError, match="loss 'triplet' has no scale .it takes: margin"):
        build_loss("triplet", LossConfig(scale=10))
    with pytest.raises(ConfigError, match="margin must be >= 0"):
        build_loss("hinge", LossConfig(margin=-1))


def test_one_seed():
    from siamese.errors import ConfigError

    with pytest.raises(ConfigError, match="two seeds"):
        train(
            Pairs(["a b", "c d"], ["a b", "c d"], np.array([1, 1], dtype=np.int8)),
            model_config=ModelConfig(seed=3),
            config=TrainConfig(seed=4, epochs=1),
            progress=False,
        )


def test_the_saved_train_options_come_back_as_given(tmp_path):
    """A resume re-runs the options a checkpoint saved (JSON): paths come back as paths, numbers as
    numbers, the configurations whole."""
    import json
    from pathlib import Path

    from siamese.config.configs import LossConfig
    from siamese.config.run import TrainRun
    from siamese.training.run import run_from_json, run_json

    run = TrainRun(
        data=[tmp_path / "a.csv", tmp_path / "b.csv"], weight=[2.0, 0.5], out=tmp_path / "m", val_data=tmp_path / "v"
    )
    model_config = ModelConfig(encoder="bow", glove=str(tmp_path / "glove.txt"), encoder_options={"ngrams": 2})
    config = TrainConfig(epochs=3, lr=1e-3, log_dir=str(tmp_path / "logs"), loss_options=LossConfig(margin=0.3))
    back = run_from_json(json.loads(json.dumps(run_json(run, model_config, config))))
    assert back == (run, model_config, config)
    assert isinstance(back[0].data[0], Path) and back[0].weight == [2.0, 0.5]
