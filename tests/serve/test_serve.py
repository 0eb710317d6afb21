"""The HTTP service: a real server on 127.0.0.1, real requests, the official openai client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest
from conftest import call


def test_health_and_openapi(server):
    base, model, index = server
    status, body = call(base, "/health")
    assert status == 200 and body["status"] == "ok" and body["index_size"] == 3000
    assert body["threshold"] == pytest.approx(model.threshold)
    status, schema = call(base, "/openapi.json")
    assert status == 200
    assert {"/similarity", "/search", "/embed", "/v1/embeddings", "/health"} <= set(schema["paths"])


def test_the_api_docs_build_without_a_warning_and_head_health_answers(server, small_calibrated):
    import warnings

    from siamese.serve.app import create_app

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "Duplicate Operation ID health_health_head" was logged at every /docs
        schema = create_app(small_calibrated.model).openapi()
    assert set(schema["paths"]["/health"]) == {"get"}
    base, _, _ = server
    with urllib.request.urlopen(urllib.request.Request(base + "/health", method="HEAD"), timeout=30) as r:
        assert r.status == 200 and r.read() == b""


def test_similarity_matches_the_model(server):
    base, model, _ = server
    pairs = [
        ["When will I see you?", "When can I see you again?"],
        ["Do they enjoy eating the dessert?", "Do they like hiking in the desert?"],
    ]
    status, body = call(base, "/similarity", {"pairs": pairs})
    assert status == 200
    expected = model.similarity_pairwise([a for a, _ in pairs], [b for _, b in pairs])
    assert [r["similarity"] for r in body["results"]] == pytest.approx(expected.tolist(), abs=1e-5)
    assert [r["duplicate"] for r in body["results"]] == [bool(s > model.threshold) for s in expected]
    # the fixture's model is calibrated (on its validation pairs, when trained)
    assert [r["probability"] for r in body["results"]] == pytest.approx(model.calibrator(expected).tolist(), abs=1e-5)
    status, body = call(base, "/similarity", {"pairs": pairs, "threshold": -1.0})
    assert all(r["duplicate"] for r in body["results"])


def test_search_and_embed(server):
    base, model, index = server
    q = index.texts[42]
    status, body = call(base, "/search", {"query": q, "k": 3})
    assert status == 200 and len(body["hits"]) == 3
    assert body["hits"][0]["similarity"] == pytest.approx(1.0, abs=1e-4)
    assert [h["id"] for h in body["hits"]] == [h.id for h in index.search(q, 3)[0]]
    status, body = call(base, "/embed", {"texts": ["a question", "another one"]})
    assert status == 200 and body["dim"] == model.dim
    assert np.allclose(body["embeddings"], model.encode(["a question", "another one"]), atol=1e-6)


def test_openai_client(server):
    openai = pytest.importorskip("openai")
    base, model, _ = server
    client = openai.OpenAI(base_url=base + "/v1", api_key="not-needed", max_retries=0)
    texts = ["How do I cancel my car insurance?", "Is life insurance taxable?"]
    resp = client.embeddings.create(model="siamese", input=texts)  # the client asks for base64 by default
    assert [d.index for d in resp.data] == [0, 1]
    assert np.allclose([d.embedding for d in resp.data], model.encode(texts), atol=1e-6)
    assert resp.usage.prompt_tokens > 0
    resp = client.embeddings.create(model="siamese", input=texts[0], encoding_format="float")
    assert np.allclose(resp.data[0].embedding, model.encode(texts[:1])[0], atol=1e-6)
    # shortened as OpenAI's own: the first dimensions, unit length (encode(..., truncate_dim=8, normalize_embeddings))
    resp = client.embeddings.create(model="siamese", input=texts, dimensions=8)
    short = model.encode(texts, truncate_dim=8, normalize_embeddings=True)
    assert np.allclose([d.embedding for d in resp.data], short, atol=1e-6) and short.shape == (2, 8)


@pytest.mark.parametrize(
    "path, body, status, fragment",
    [
        ("/similarity", {"pairs": []}, 422, "empty"),
        ("/similarity", {"pairs": [["a", "b"]] * 300}, 413, "at most 256"),
        ("/similarity", {"pairs": [["a" * 3000, "b"]]}, 413, "characters"),
        ("/similarity", {"pairs": [["a", "  "]]}, 422, "empty"),
        ("/similarity", {"pairs": "nope"}, 422, ""),
        ("/search", {"query": "x", "k": 1000}, 422, "at most 100"),
        ("/embed", {"texts": []}, 422, "empty"),
        ("/v1/embeddings", {"input": ["ok"], "encoding_format": "int8"}, 422, "encoding_format"),
        ("/v1/embeddings", {"input": "ok", "dimensions": 100_000}, 422, "dimensions"),
        ("/v1/embeddings", {"input": "ok", "dimensions": 0}, 422, "dimensions"),
        # thresholds are cosines or probabilities, as everywhere else; a number in a string is not a number
        ("/search", {"query": "x", "threshold": 2}, 422, "threshold"),  # was a 500
        ("/search", {"query": "x", "threshold": -1.0000001}, 422, "threshold"),
        ("/similarity", {"pairs": [["a", "b"]], "threshold": 90}, 422, "threshold"),  # was answered
        ("/similarity", {"pairs": [["a", "b"]], "threshold": "0.5"}, 422, "threshold"),
        ("/similarity", {"pairs": [["a", "b"]], "threshold": True}, 422, "threshold"),
        ("/search", {"query": "x", "k": "3"}, 422, "k"),
    ],
)
def test_bad_requests_get_clear_4xx(server, path, body, status, fragment):
    got, detail = call(server[0], path, body)
    assert got == status
    assert fragment in json.dumps(detail)


def test_malformed_and_oversized_bodies(server):
    base = server[0]
    got, _ = call(base, "/similarity", raw=b"{not json")
    assert got == 422
    got, detail = call(base, "/embed", raw=json.dumps({"texts": ["x" * 1000] * 1200}).encode())
    assert got == 413 and "bytes" in detail["detail"]


@pytest.mark.parametrize("which", ["service", "label page"])
def test_an_app_made_in_python_refuses_a_foreign_host_unless_told(small_calibrated, tmp_path, which):
    """create_app answered any Host header unless its caller named the host names, as only the CLI did: a page
    on another site that rebinds its name to 127.0.0.1 could read the service. Now None means this machine's
    names; ANY_HOST lets every Host through. A real uvicorn server on 127.0.0.1 for each."""
    import threading
    import time

    import uvicorn
    from conftest import free_port

    from siamese.serve.security import ANY_HOST

    def make(**kw):
        if which == "service":
            from siamese.serve.app import create_app

            return create_app(small_calibrated.model, **kw), "/health"
        from siamese.label.session import LabelSession
        from siamese.label.store import LabelStore
        from siamese.label.web import create_app as label_app

        pairs = [("How do I get a loan?", "How can I get a loan?"), ("Is it raining?", "Where is Paris?")]
        scores = small_calibrated.model.similarity_pairwise([a for a, _ in pairs], [b for _, b in pairs])
        from siamese.label.selection import pair_candidates

        candidates = pair_candidates([a for a, _ in pairs], [b for _, b in pairs], scores, [2, 3])
        session = LabelSession(small_calibrated.model, candidates, LabelStore(tmp_path / f"labels{len(kw)}.csv"))
        return label_app(session, token="t", **kw), "/"

    for kw, foreign in (({}, 421), ({"host_names": ANY_HOST}, 200)):
        app, path = make(**kw)
        port = free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 30
            while not server.started and time.monotonic() < deadline:
                time.sleep(0.05)
            base = f"http://127.0.0.1:{port}"
            hosts = [("evil.example", foreign), ("localhost:abc", foreign)]  # not ours; no port of digits
            hosts += [("localhost", 200), (f"127.0.0.1:{port}", 200)]
            for host, status in hosts:
                req = urllib.request.Request(base + path, headers={"Host": host})
                try:
                    with urllib.request.urlopen(req, timeout=30) as r:
                        got = r.status
                except urllib.error.HTTPError as e:
                    got = e.code
                assert got == status, (which, kw, host, got)
        finally:
            server.should_exit = True
            thread.join(timeout=30)
