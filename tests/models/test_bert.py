"""siamese.models.encoders.bert against transformers' BertModel (the independent reference): the same
weights give the same hidden states, pooler output and gradients; a saved MiniLM folder loads and
encodes without importing transformers; configurations it does not cover go through transformers."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from siamese.models.encoders import bert

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def reference():
    from siamese.models.pretrained import model_folder

    folder = model_folder("minilm")
    hf = transformers.AutoModel.from_pretrained(str(folder), local_files_only=True, use_safetensors=True)
    return hf, json.loads(hf.config.to_json_string())


@pytest.fixture(scope="module")
def minilm_folder(tmp_path_factory):
    from siamese.models.sentence_encoder import from_pretrained

    return from_pretrained("minilm").save(tmp_path_factory.mktemp("minilm") / "model")


def _batch():
    torch.manual_seed(0)
    ids = torch.randint(1000, 30000, (3, 11))
    mask = torch.ones_like(ids)
    mask[1, 7:] = 0  # padded rows: the keys past a text's end are ignored
    mask[2, 3:] = 0
    ids[mask == 0] = 0
    return ids, mask


def _ours(hf, config: dict) -> bert.Bert:
    ours = bert.Bert(config)
    ours.load_state_dict(hf.state_dict(), strict=True)  # the same names, every one
    return ours


def test_the_same_weights_give_the_same_outputs(reference):
    hf, config = reference
    ours = _ours(hf, config).eval()
    hf.eval()
    ids, mask = _batch()
    with torch.no_grad():
        theirs, mine = hf(input_ids=ids, attention_mask=mask), ours(ids, mask)
    keep = mask.bool()
    torch.testing.assert_close(mine.last_hidden_state[keep], theirs.last_hidden_state[keep], atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(mine.pooler_output, theirs.pooler_output, atol=2e-5, rtol=1e-4)


def test_pairs_with_token_types_as_a_cross_encoder_reads_them(reference):
    """[CLS] a [SEP] b [SEP]: segment B's token type, and no pooler (add_pooling_layer=False)."""
    _, config = reference
    hf = transformers.BertModel(transformers.BertConfig.from_dict(config), add_pooling_layer=False).eval()
    ours = bert.Bert(config, pooler=False)
    ours.load_state_dict(hf.state_dict(), strict=True)
    ours.eval()
    ids, mask = _batch()
    types = torch.zeros_like(ids)
    types[:, 5:] = 1
    types[mask == 0] = 0
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask, token_type_ids=types).last_hidden_state
        mine = ours(ids, mask, token_type_ids=types)
    assert mine.pooler_output is None
    torch.testing.assert_close(mine.last_hidden_state[mask.bool()], theirs[mask.bool()], atol=2e-5, rtol=1e-4)


def test_the_same_gradients_when_training(reference):
    _, config = reference
    config = {**config, "hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}  # deterministic
    hf = transformers.BertModel(transformers.BertConfig.from_dict(config), add_pooling_layer=True)
    ours = _ours(hf, config)
    hf.train()
    ours.train()
    ids, mask = _batch()
    for model, out in ((hf, hf(input_ids=ids, attention_mask=mask)), (ours, ours(ids, mask))):
        (out.last_hidden_state * mask[..., None]).pow(2).mean().backward()
        model.grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    assert set(ours.grads) <= set(hf.grads) and len(ours.grads) > 90
    for name, grad in ours.grads.items():
        torch.testing.assert_close(grad, hf.grads[name], atol=1e-5, rtol=1e-3, msg=name)


def test_a_minilm_folder_loads_and_encodes_without_transformers(minilm_folder):
    code = (
        "import sys, json; from siamese import SiameseModel; "
        f"m = SiameseModel.load({str(minilm_folder)!r}, device='cpu', precision='fp32'); "
        "v = m.encode(['When will I see you?', 'When can I see you again?']); "
        "print(json.dumps({'transformers': 'transformers' in sys.modules, 'cos': float(v[0] @ v[1])}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["transformers"] is False
    assert result["cos"] == pytest.approx(0.812, abs=0.002)  # the demo's example pair


def test_other_architectures_go_through_transformers(reference):
    _, config = reference
    assert bert.supports(config)
    assert not bert.supports({**config, "model_type": "mpnet"})
    assert not bert.supports({**config, "position_embedding_type": "relative_key"})
    assert not bert.supports({**config, "is_decoder": True})
