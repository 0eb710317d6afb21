"""Device mistakes caught without a GPU.

Two ways, both of which fail on a tensor made on the host inside a model (e.g. a loss's
``torch.zeros(1)`` without ``device=``):

- PyTorch's ``meta`` device: weights and inputs there, no data; an op mixing a meta tensor with a
  host tensor raises, as it would on a GPU. Losses, heads, pooling, the encoders that need no data
  to run (LSTM, CNN, transformer), the cross-encoder and one optimisation step run there.
- :class:`HostFactories`: a mode in which making a host tensor of one element or more without naming a
  device raises (a GPU run would meet it there). The encoders whose ops read the data (packing by
  lengths, the bag of words' counts) and a whole training run of each encoder run under it.

The end-to-end check on a real GPU is ``make gpu-check`` (bench/gpu.py; docs/gpu.md).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.fx.experimental._config as fx_config
import typer
from torch.overrides import TorchFunctionMode

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.models.encoders.common import POOLINGS, AttentionPooling, pool
from siamese.models.heads import HEADS, build_head
from siamese.models.losses import LOSSES, LossConfig, build_loss
from siamese.runtime.devices import resolve_device, to_device
from siamese.runtime.parallel import ParallelEncoder
from siamese.runtime.precision import autocast, grad_scaler, resolve_precision
from siamese.training.bi_encoder import BatchLoss, PairTensors
from siamese.training.loop import Fitted, Trainer

META = torch.device("meta")
DIM = 8

FACTORIES = {
    torch.zeros,
    torch.ones,
    torch.empty,
    torch.full,
    torch.arange,
    torch.eye,
    torch.tensor,
    torch.randn,
    torch.rand,
    torch.randint,
    torch.linspace,
}


class HostFactories(TorchFunctionMode):
    """Raises when a factory makes a host tensor (one element or more) without naming a device."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in FACTORIES and "device" not in kwargs and isinstance(out, torch.Tensor) and out.dim() > 0:
            raise AssertionError(f"torch.{func.__name__} made a {tuple(out.shape)} host tensor without a device")
        return out


def vectors(n: int = 4, device=META) -> torch.Tensor:
    return torch.nn.functional.normalize(torch.randn(n, DIM), dim=-1).to(device)


def loss_inputs(name: str, device) -> dict:
    labels = torch.tensor([1.0, 0.0, 1.0, 0.0]).to(device)  # both labels: the labelled losses need them
    extra = {"teacher": (vectors(device=device), vectors(device=device))} if name == "distill" else {}
    return {"labels": labels, **extra}


LOSS_HEADS = [(loss, head) for loss in sorted(LOSSES) for head in LOSSES[loss].heads]


@pytest.fixture(autouse=True)
def meta_counts_every_mask_true():
    """Indexing by a boolean mask asks how many are true: meta has no data, so say all (the shapes
    are then wrong, the devices still right, which is what is checked here)."""
    with fx_config.patch(meta_nonzero_assume_all_nonzero=True):
        yield


@pytest.mark.parametrize(("name", "head"), LOSS_HEADS)
def test_every_loss_computes_on_its_inputs_device(name, head):
    loss = build_loss(name, LossConfig())
    on_meta = build_head(head, DIM).to(META)
    out = loss(vectors(), vectors(), head=on_meta, **loss_inputs(name, META))
    assert out.device == META and out.dim() == 0
    if name in ("triplet", "hinge", "mnr"):  # with explicit negatives too
        assert loss(vectors(), vectors(), negative=vectors(), head=on_meta, **loss_inputs(name, META)).device == META
    a, b, on_cpu, inputs = vectors(device="cpu"), vectors(device="cpu"), build_head(head, DIM), loss_inputs(name, "cpu")
    with HostFactories():  # and on the CPU, no host tensor made without a device
        value = loss(a, b, head=on_cpu, **inputs)
    assert torch.isfinite(value)


def test_both_checks_catch_the_cosent_of_issue_34():
    """The mistake they are for: a ``torch.zeros(1)`` joined to the scores."""

    def old_cosent(s: torch.Tensor) -> torch.Tensor:
        return torch.logsumexp(torch.cat([torch.zeros(1, dtype=s.dtype), s]), 0)

    with pytest.raises(RuntimeError, match="meta"):
        old_cosent(torch.zeros(3, device=META))
    scores = torch.zeros(3)
    with pytest.raises(AssertionError, match="torch.zeros made a \\(1,\\) host tensor"), HostFactories():
        old_cosent(scores)


@pytest.mark.parametrize("name", sorted(HEADS))
def test_every_head_scores_on_its_inputs_device(name):
    head = build_head(name, DIM).to(META)
    assert head(vectors(), vectors()).device == META


@pytest.mark.parametrize("pooling", POOLINGS)
def test_every_pooling_runs_on_the_device(pooling):
    states = torch.randn(3, 5, DIM, device=META)
    mask = torch.ones(3, 5, dtype=torch.bool, device=META)
    out = pool(states, mask, pooling, AttentionPooling(DIM).to(META))
    assert out.device == META and out.shape == (3, DIM)


@pytest.fixture(scope="module")
def pairs(data_dir):
    data = datasets.load("quora-sample", data_dir)
    rows = np.random.default_rng(0).permutation(len(data))
    return data.subset(rows[:64]), data.subset(rows[64:96])


def small_model(pairs, encoder: str, loss: str = "cosent", head: str = "cosine") -> SiameseModel:
    options = {} if encoder == "transformer" else {"dim": 16}
    config = ModelConfig(encoder=encoder, loss=loss, head=head, **options)
    return SiameseModel.build(pairs[0].text1 + pairs[0].text2, config)


def first_batch(model: SiameseModel, pairs) -> tuple[torch.Tensor, torch.Tensor]:
    return PairTensors(model, pairs[0].subset(np.arange(4))).batch(np.arange(4))


@pytest.mark.parametrize("encoder", ["lstm", "cnn"])
def test_encoders_that_need_no_data_run_on_the_meta_device(pairs, encoder):
    model = small_model(pairs, encoder).to(META)
    assert model.device == META
    ids, lengths = first_batch(model, pairs)
    out = model.encoder(to_device(ids, META), to_device(lengths, META))
    assert out.device == META and out.shape[0] == 8  # both sides of 4 pairs


@pytest.mark.parametrize("encoder", ["bilstm", "bilstm-max", "bow", "transformer"])
def test_encoders_that_read_their_data_make_no_host_tensor(pairs, encoder):
    """(Packing by length, the bag of words' counts and Hugging Face's attention mask read values:
    these cannot run on meta.)"""
    model = small_model(pairs, encoder)
    ids, lengths = first_batch(model, pairs)
    with HostFactories():
        assert model.encoder(ids, lengths).shape[0] == 8


@pytest.mark.parametrize("loss", ["cosent", "mnr", "bce"])
def test_one_optimisation_step_runs_on_the_meta_device(pairs, loss):
    """What a training step does: the batch moved, encoder, head and loss, backward, the update."""
    model = small_model(pairs, "lstm", loss, head="l1" if loss == "bce" else "cosine").to(META)
    step = BatchLoss(model.encoder, model.head, ParallelEncoder(model.encoder, 1), build_loss(loss, LossConfig()))
    data = PairTensors(model, pairs[0], graded=True)
    rows = np.arange(8)
    ids, lengths = data.batch(rows)
    value = step(to_device(ids, META), to_device(lengths, META), len(rows), to_device(data.labels[rows], META), None)
    assert value.device == META
    params = [p for p in [*model.encoder.parameters(), *model.head.parameters()] if p.requires_grad]
    sparse = {id(p) for m in model.encoder.modules() if getattr(m, "sparse", False) for p in m.parameters()}
    dense = [p for p in params if id(p) not in sparse]  # (meta has no sparse kernels: the lazy Adam's rows aside)
    modules = torch.nn.ModuleList([model.encoder, model.head])
    Trainer(modules, [torch.optim.SGD(dense, lr=0.1)], epochs=1, rng=None).update(value)
    assert all(p.grad is not None and p.grad.device == META for p in params)


@pytest.mark.parametrize(
    ("encoder", "head", "loss"),
    [("lstm", "cosine", "cosent"), ("bilstm", "l1", "bce"), ("cnn", "cosine", "mnr"), ("bow", "cosine", "cosent")],
)
def test_a_training_run_makes_no_host_tensor_without_a_device(pairs, encoder, head, loss):
    """The whole of train(): batches, steps, validation, the threshold (the CPU fast paths off: the
    compiled kernel and the threads are the CPU's own)."""
    config = TrainConfig(epochs=1, batch_size=16, precision="fp32", workers=1, device="cpu")
    model_config = ModelConfig(encoder=encoder, head=head, loss=loss, dim=16)
    with HostFactories():
        model = train(pairs[0], pairs[1], model_config=model_config, config=config, progress=False)
    assert model.info["training"]["device"] == "cpu"


def test_the_cross_encoder_moves_its_batches_to_its_device():
    from siamese.cross import CrossConfig, CrossEncoder

    model = CrossEncoder.build(CrossConfig(max_length=32))
    encodings = model.tokenizer.encode(["a cat sat", "dogs run"], ["the cat sat", "dogs ran fast"])
    with HostFactories():  # (its transformer reads the mask's values: it cannot run on meta)
        assert model.network(*model.device_batch(encodings)).shape == (2,)
    model.to(META)
    assert model.device == META and all(t.device == META for t in model.device_batch(encodings))


def test_throughput_leaves_the_warm_up_step_out(pairs):
    assert Fitted(seconds=10.0, items=1000, warmup_seconds=5.0, warmup_items=100).per_second == 180.0
    assert Fitted(seconds=2.0, items=100, warmup_seconds=2.0, warmup_items=100).per_second == 50.0  # one step only
    model = train(
        pairs[0],
        None,
        model_config=ModelConfig(dim=16),
        config=TrainConfig(epochs=2, batch_size=16, device="cpu"),
        progress=False,
    )
    info = model.info["training"]
    assert 0 < info["warmup_seconds"] < info["train_seconds"] and info["pairs_per_second"] > 0


def test_precision_auto_is_mixed_on_a_cuda_gpu_for_transformers_only(monkeypatch):
    """The choice itself (no GPU needed): bf16 where the GPU has it, else fp16 with a gradient scaler."""
    cuda = torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert resolve_precision("auto", cuda) == "bf16"
    assert resolve_precision("auto", cuda, mixed_on_gpu=False) == "fp32"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert resolve_precision("auto", cuda) == "fp16"
    with pytest.raises(Exception, match="needs a GPU with bfloat16"):
        resolve_precision("bf16", cuda)
    with pytest.raises(Exception, match="'fp16' is for CUDA GPUs"):
        resolve_precision("fp16", torch.device("cpu"))
    assert grad_scaler("bf16", cuda) is None and grad_scaler("fp16", torch.device("cpu")) is None
    assert autocast("fp32")().__class__.__name__ == "nullcontext"


def test_asking_for_a_gpu_that_is_not_there_is_one_line():
    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    with pytest.raises(Exception, match="no CUDA GPU here") as e:
        resolve_device("cuda")
    assert "\n" not in str(e.value)


# Every command that runs a model takes --device (the others: formats lists formats; summary and
# export read the weights on the CPU, where ONNX export and the Keras-like table are made).
NO_MODEL = {"formats", "summary", "export"}


def commands(group, prefix: str = "") -> dict:
    """Every command of a (Typer's own click) group, sub-groups' by their full name."""
    found = {}
    for name, command in group.commands.items():
        if hasattr(command, "commands"):
            found.update(commands(command, f"{prefix}{name} "))
        else:
            found[f"{prefix}{name}"] = command
    return found


def test_every_model_running_command_declares_device():
    from siamese.cli import app

    every = commands(typer.main.get_command(app))
    assert {"train", "distill", "pretrained", "encode", "index build", "dedupe", "serve", "emoji train"} <= set(every)
    missing = sorted(
        name
        for name, command in every.items()
        if name not in NO_MODEL and not any("--device" in p.opts for p in command.params)
    )
    assert missing == []


def test_a_worker_of_several_takes_its_own_gpu(monkeypatch):
    """--nproc N / torchrun on N GPUs: "cuda" and "auto" are the worker's cuda:LOCAL_RANK, and more
    workers than GPUs is refused before NCCL would fail on a shared GPU."""
    from siamese.runtime.distributed import World, process_group

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_device("cuda") == torch.device("cuda", 1) == resolve_device("auto")
    assert resolve_device("cuda:0") == torch.device("cuda", 0)  # named: as asked
    with pytest.raises(Exception, match="4 workers on this machine but 2 CUDA GPU"):
        with process_group(World(rank=1, size=4, local_rank=1, local_size=4), torch.device("cuda", 1)):
            pass


def test_explain_and_summary_make_no_host_tensor(pairs):
    """predict --explain (the bag of words' exact shares) and summary run where the model is."""
    from siamese.models.summary import summary_rows

    model = small_model(pairs, "bow")
    with HostFactories():
        explanation = model.explain("how do I learn python", "how can I learn python fast")
        rows = summary_rows(model)
    assert explanation.method == "exact" and rows


@pytest.fixture(scope="module")
def tiny_folder(pairs, tmp_path_factory):
    model = train(pairs[0], None, model_config=ModelConfig(dim=16), config=TrainConfig(epochs=1), progress=False)
    return model.save(tmp_path_factory.mktemp("tiny") / "model")


def test_every_kind_of_command_refuses_a_missing_gpu_in_one_line(tiny_folder, data_dir, tmp_path):
    """--device reaches the model in each family of commands (here, with no GPU: the one-line refusal)."""
    from conftest import invoke

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    pairs_file = data_dir / "quora" / "quora_question_pairs_sample300.csv"
    texts = tmp_path / "texts.txt"
    texts.write_text("".join(f"how do I learn python in {n} days\n" for n in range(12)))  # distill needs 10
    commands = [
        ["predict", tiny_folder, "a cat", "a dog"],
        ["evaluate", tiny_folder, "--data", pairs_file],
        ["encode", tiny_folder, "--data", texts, "--out", tmp_path / "v.npy"],
        ["rank", tiny_folder, "learn python", "--candidates", texts],
        ["train", "--data", pairs_file, "--epochs", "1", "--out", tmp_path / "m"],
        ["train", "--cross", "--data", pairs_file, "--epochs", "1", "--out", tmp_path / "c"],
        ["distill", "--data", texts, "--out", tmp_path / "d"],
    ]
    for command in commands:
        ran = invoke(*command, "--device", "cuda")
        assert ran.returncode == 2, (command, ran.stdout, ran.stderr)
        assert ran.stderr.strip().splitlines() == [ran.stderr.strip()] and "no CUDA GPU here" in ran.stderr, command
