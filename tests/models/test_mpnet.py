"""siamese.models.encoders.mpnet against transformers' MPNetModel (the independent reference): the same
weights give the same hidden states and gradients, the relative-position buckets are MPNet's own, and
``train --from mpnet``'s trained top layers write back into all-mpnet-base-v2's network so that the saved
model encodes as the trained layers did."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from siamese.models.encoders import mpnet

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def small():
    """A small random MPNetModel (2 layers, 4 heads) and its config as a dict."""
    torch.manual_seed(0)
    config = transformers.MPNetConfig(
        vocab_size=500, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64
    )
    hf = transformers.MPNetModel(config, add_pooling_layer=False)
    with torch.no_grad():  # the bias table starts at zero in some versions: make it matter
        hf.encoder.relative_attention_bias.weight.normal_(0, 1.0)
    return hf, json.loads(config.to_json_string())


def _batch(length: int = 140):
    torch.manual_seed(1)
    ids = torch.randint(5, 500, (3, length))
    mask = torch.ones_like(ids)
    mask[1, 60:] = 0  # right padding: keys past a text's end are ignored
    mask[2, 3:] = 0
    ids[mask == 0] = 1  # MPNet's <pad>
    return ids, mask


def _ours(hf, config: dict) -> mpnet.MPNet:
    ours = mpnet.MPNet(config)
    ours.load_state_dict(hf.state_dict(), strict=True)  # the same names, every one
    return ours


def test_relative_position_buckets_are_mpnet_s_own(small):
    hf, _ = small
    position = torch.arange(300)
    theirs = hf.encoder.relative_position_bucket(position[None, :] - position[:, None], num_buckets=32)
    assert torch.equal(mpnet.relative_buckets(300, 32), theirs)
    assert len(theirs.unique()) == 31  # near, far, both directions (bucket 16, "0 to the right", never occurs)


def test_the_same_weights_give_the_same_hidden_states_and_gradients(small):
    hf, config = small
    ours = _ours(hf, config)
    hf.eval(), ours.eval()
    ids, mask = _batch()
    keep = mask.bool()
    theirs, mine = hf(input_ids=ids, attention_mask=mask).last_hidden_state, ours(ids, mask).last_hidden_state
    torch.testing.assert_close(mine[keep], theirs[keep], atol=2e-5, rtol=1e-4)
    theirs[keep].pow(2).sum().backward()
    mine[keep].pow(2).sum().backward()
    for name in ("encoder.layer.0.attention.attn.q.weight", "encoder.relative_attention_bias.weight"):
        g_theirs = hf.get_parameter(name).grad
        g_mine = ours.get_parameter(name).grad
        torch.testing.assert_close(g_mine, g_theirs, atol=1e-4, rtol=1e-3)


def test_other_transformers_are_not_claimed():
    assert mpnet.supports({"model_type": "mpnet", "hidden_size": 768, "num_attention_heads": 12})
    assert not mpnet.supports({"model_type": "bert", "hidden_size": 384, "num_attention_heads": 12})
    assert not mpnet.supports({"model_type": "mpnet", "hidden_act": "swish", "hidden_size": 8})


def test_trained_top_layers_of_mpnet_write_back_into_the_saved_network(data_dir):
    """The recipe's pieces on all-mpnet-base-v2 (one trainable layer, a few pairs): the model's own
    encode after write_back gives the vectors the trained top gave, so what was chosen is what is saved."""
    from siamese.data.pairs import read_pairs
    from siamese.models.sentence_encoder import load_bi_encoder
    from siamese.training.learn import LearnOptions, _Tower, fine_tune

    model = load_bi_encoder("mpnet", device="cpu")
    tower = _Tower(model, 11, torch.device("cpu"), "fp32")
    pairs = read_pairs(data_dir / "mqp" / "mqp.csv")
    texts = list(dict.fromkeys(pairs.text1[:16] + pairs.text2[:16]))
    where = {t: i for i, t in enumerate(texts)}
    states, pretrained = tower.states(model.vectorizer.encode(texts))
    np.testing.assert_allclose(pretrained, model.encode(texts), atol=1e-4)  # the frozen pass is mpnet's own
    a = np.array([where[t] for t in pairs.text1[:16]])
    b = np.array([where[t] for t in pairs.text2[:16]])
    top = fine_tune(tower, states, a, b, pairs.labels[:16], LearnOptions(epochs=1, lr=1e-3, device="cpu"), 1)
    trained = top.cosines(states, a, b)
    tower.write_back(top, model)
    v = model.encode(texts)
    saved = np.einsum("ij,ij->i", v[a], v[b])
    np.testing.assert_allclose(saved, trained, atol=1e-3)  # the top trained on states cached in bf16
    assert np.abs(saved - np.einsum("ij,ij->i", pretrained[a], pretrained[b])).max() > 1e-2  # it did train
