"""The service under hostile input and load: real servers on 127.0.0.1, raw sockets where HTTP
clients would be too polite, a fuzzer (hypothesis), Prometheus' own parser for /metrics."""

from __future__ import annotations

import http.client
import json
import select
import socket
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from conftest import SCRIPT, serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from siamese import SiameseModel, read_texts
from siamese.search import DuplicateIndex
from siamese.serve.batcher import BatchConfig, Batcher

KEYS = ["key-one-12345", "key-two-67890"]


def rss_kb(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


class Client:
    """One keep-alive connection; reopened when the server closes it (as it does after 408/413)."""

    def __init__(self, port: int, headers: dict | None = None):
        self.port, self.headers, self.conn = port, headers or {}, None

    def call(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None):
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            try:
                self.conn.request(
                    method,
                    path,
                    body=body,
                    headers={"Content-Type": "application/json", **self.headers, **(headers or {})},
                )
                r = self.conn.getresponse()
                data = r.read()
                if r.getheader("connection", "").lower() == "close":
                    self.close()
                return r.status, dict(r.getheaders()), data
            except (ConnectionError, http.client.RemoteDisconnected, BrokenPipeError):
                self.close()
                if attempt:
                    raise

    def json(self, method, path, body=None, **kw):
        status, headers, data = self.call(method, path, None if body is None else json.dumps(body).encode(), **kw)
        return status, headers, json.loads(data)

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


@pytest.fixture(scope="module")
def small_index(small_calibrated, data_dir, tmp_path_factory):
    model = SiameseModel.load(small_calibrated.path)
    index = DuplicateIndex(model)
    index.add(read_texts(data_dir / "insuranceqa/questions.csv", "question")[:500])
    return index.save(tmp_path_factory.mktemp("hardening") / "idx")


@pytest.fixture(scope="module")
def hardened(small_calibrated, small_index, tmp_path_factory):
    """An open server with a short read timeout; its stderr (the access log) in a file."""
    log = tmp_path_factory.mktemp("hardened-log") / "stderr.log"
    with serving(small_calibrated.path, small_index, "--read-timeout", "1.5", log=log) as served:
        yield served


@pytest.fixture(scope="module")
def guarded(small_calibrated, tmp_path_factory):
    """API keys (one from --api-key, one from the environment is ignored then), a 2-request queue
    and a long batch wait so that a burst fills the queue."""
    log = tmp_path_factory.mktemp("guarded-log") / "stderr.log"
    with serving(
        small_calibrated.path,
        None,
        "--api-key",
        KEYS[0],
        "--api-key",
        KEYS[1],
        "--max-queue",
        "2",
        "--batch-wait-ms",
        "400",
        "--max-batch",
        "100000",
        log=log,
    ) as served:
        yield served


# -- bodies Python's json takes but the API cannot ----------------------------------------------


@pytest.mark.parametrize(
    "raw, fragment",
    [
        (b'{"pairs": [["\\ud800", "b"]]}', "lone surrogate"),
        (b'{"texts": ["ok", "x\\udfffy"]}', "lone surrogate"),
        (b'{"query": "q", "k": 3, "\\ud83d": 1}', "lone surrogate"),
        (b'{"pairs": [["a", "b"]], "threshold": NaN}', "NaN"),
        (b'{"pairs": [["a", "b"]], "threshold": -Infinity}', "Infinity"),
        (b'{"pairs": [["a", "b"]], "threshold": 1e400}', "out of range"),
        (b'{"pairs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested"),
        (b'{"pairs": ' + b"[" * 40 + b"]" * 40 + b"}", "nested"),
        (b'{"k": 1' + b"0" * 5000 + b', "query": "q"}', "5001 digits; at most 30"),
        (b'{"texts": ["\xff\xfe"]}', "not valid JSON"),
        (b"{not json", "not valid JSON"),
    ],
)
def test_bad_json_is_422_and_the_connection_lives(hardened, raw, fragment):
    client = Client(hardened.port)
    for path in ("/similarity", "/embed", "/search", "/v1/embeddings"):
        status, _, data = client.call("POST", path, raw)
        assert status == 422, (path, data[:200])
        assert fragment in json.loads(data)["detail"]
    conn = client.conn
    assert client.json("GET", "/health")[0] == 200 and client.conn is conn  # same keep-alive connection
    client.close()


def json_values(texts):
    scalars = (
        st.none()
        | st.booleans()
        | st.integers(-(10**30), 10**30)
        | st.floats(allow_nan=True, allow_infinity=True)
        | texts
    )
    return st.recursive(
        scalars, lambda inner: st.lists(inner, max_size=6) | st.dictionaries(texts, inner, max_size=5), max_leaves=30
    )


# texts with lone surrogates, control characters, long runs; json.dumps writes surrogates as \ud800
TEXTS = st.text(st.characters(codec=None, exclude_categories=()), max_size=30) | st.sampled_from(
    ["", " ", "a" * 2500, "\ud800", "\udc00x", "\x00", "What is life insurance?"]
)
BODIES = st.one_of(
    st.fixed_dictionaries(
        {"pairs": st.lists(st.lists(TEXTS, min_size=0, max_size=3), max_size=4)},
        optional={"threshold": json_values(TEXTS)},
    ),
    st.fixed_dictionaries({"texts": json_values(TEXTS)}),
    st.fixed_dictionaries(
        {"query": json_values(TEXTS)}, optional={"k": json_values(TEXTS), "threshold": json_values(TEXTS)}
    ),
    st.fixed_dictionaries(
        {"input": json_values(TEXTS)}, optional={"encoding_format": TEXTS, "dimensions": json_values(TEXTS)}
    ),
    json_values(TEXTS),
)


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(path=st.sampled_from(["/similarity", "/search", "/embed", "/v1/embeddings"]), body=BODIES, cut=st.integers(0, 3))
def test_fuzzed_bodies_never_get_5xx(hardened, path, body, cut):
    raw = json.dumps(body, allow_nan=True).encode()
    if cut == 1:
        raw = raw[: len(raw) // 2]  # truncated JSON
    client = Client(hardened.port)
    status, _, data = client.call("POST", path, raw)
    assert status < 500, (path, raw[:300], data[:300])
    json.loads(data)  # an answer, not a dropped connection
    client.close()


# -- the body limit, counted as bytes arrive ---------------------------------------------------


def test_chunked_60mb_body_is_413_without_reading_it(hardened):
    before = rss_kb(hardened.proc.pid)
    sock = socket.create_connection(("127.0.0.1", hardened.port), timeout=10)
    sock.sendall(
        b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"%x\r\n" % 65536 + b"[" + b" " * 65535 + b"\r\n"
    sent, answer = 0, b""
    while sent < 60_000_000:
        if select.select([sock], [], [], 0)[0]:
            break
        try:
            sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            break
        sent += 65536
    try:
        sock.settimeout(10)
        while chunk_in := sock.recv(65536):
            answer += chunk_in
    except ConnectionResetError:
        pass
    sock.close()
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"over 1000000 bytes" in answer
    assert sent < 20_000_000, f"the client got to send {sent} bytes"  # the rest was never read
    assert rss_kb(hardened.proc.pid) - before < 30_000  # KB


def test_declared_oversized_body_is_refused_before_sending(hardened):
    # a modest one is read and dropped, so that a client still busy sending gets the answer
    status, headers, data = Client(hardened.port).call(
        "POST", "/embed", json.dumps({"texts": ["x" * 1000] * 1200}).encode()
    )
    assert status == 413 and "bytes" in json.loads(data)["detail"]
    # a huge one is cut off at once
    sock = socket.create_connection(("127.0.0.1", hardened.port))
    sock.sendall(b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n" + b"[" * 10_000)
    data, seconds = read_all(sock, 10)
    sock.close()
    assert data.startswith(b"HTTP/1.1 413") and b"connection: close" in data.lower() and seconds < 2


def urllib_post(port: int, path: str, body: bytes, headers: dict | None = None) -> int:
    """The status urllib reports; it sends "Connection: close" and raises on a reset upload."""
    req = urllib.request.Request(
        f"http://127.0.0.1:{port}{path}", data=body, headers={"Content-Type": "application/json", **(headers or {})}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code


def test_early_answers_reach_a_client_still_uploading(hardened, guarded):
    # the server answers before reading the body; were it to close at once, the upload would be
    # reset and urllib would raise "Broken pipe" (it did: 86 times in 300 for 1.2 MB under load)
    big = json.dumps({"texts": ["x" * 1000] * 7000}).encode()  # 7 MB: over the limit, under DRAIN_BYTES
    assert [urllib_post(hardened.port, "/embed", big) for _ in range(10)] == [413] * 10
    assert [urllib_post(guarded.port, "/embed", big) for _ in range(10)] == [401] * 10


# -- read and idle timeouts ------------------------------------------------------------------


def read_all(sock: socket.socket, timeout: float) -> tuple[bytes, float]:
    """Everything until the server closes the connection, and how long that took."""
    start, data = time.monotonic(), b""
    sock.settimeout(timeout)
    while piece := sock.recv(65536):
        data += piece
    return data, time.monotonic() - start


@pytest.mark.parametrize(
    "head, body",
    [
        (
            b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
            b'{"texts": [',
        ),
        (
            b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
            b'5\r\n{"tex',
        ),
    ],
)
def test_half_sent_body_is_408_and_closed(hardened, head, body):
    sock = socket.create_connection(("127.0.0.1", hardened.port))
    sock.sendall(head + body)
    data, seconds = read_all(sock, 10)
    sock.close()
    assert data.startswith(b"HTTP/1.1 408") and b"within 1.5 s" in data, data[:200]
    assert 1.0 < seconds < 5


def test_half_sent_headers_are_dropped(hardened):
    sock = socket.create_connection(("127.0.0.1", hardened.port))
    sock.sendall(b"POST /embed HTTP/1.1\r\nHost: 127.0.0.1\r\n")
    start = time.monotonic()
    for _ in range(4):  # trickling bytes does not keep it alive
        time.sleep(0.3)
        sock.sendall(b"X-A: b\r\n")
    data, _ = read_all(sock, 10)
    sock.close()
    assert data == b"" and time.monotonic() - start < 5


def test_long_arrays_are_413_before_each_item_is_validated(hardened):
    """300,000 wrongly typed items: one short 413 from the body check, not seconds of validation
    and a 30 MB list of errors; the limit counts pairs for /similarity, texts elsewhere."""
    client = Client(hardened.port)
    for path, body in (
        ("/embed", {"texts": [1] * 300_000}),
        ("/v1/embeddings", {"input": ["x"] * 257}),
        ("/similarity", {"pairs": [["a", "b"]] * 257}),
    ):
        status, _, data = client.call("POST", path, json.dumps(body).encode())
        assert status == 413 and len(data) < 300, (path, data[:200])
        assert "items; at most 256 per request" in json.loads(data)["detail"]
    status, _, body = client.json(
        "POST", "/similarity", {"pairs": [[f"question {i}", "a question"] for i in range(200)]}
    )
    assert status == 200 and len(body["results"]) == 200


@pytest.mark.parametrize(
    "path, body, message",
    [
        ("/similarity", {"pairs": [["a", "b"], ["c", " "]]}, "'pairs'[1][1] is empty"),
        ("/similarity", {"pairs": [["a", "b" * 2001]]}, "'pairs'[0][1] has 2001 characters"),
        ("/search", {"query": ""}, "'query' is empty"),
        ("/embed", {"texts": ["a", ""]}, "'texts'[1] is empty"),
    ],
)
def test_messages_name_the_item_as_the_request_holds_it(hardened, path, body, message):
    status, _, answer = Client(hardened.port).json("POST", path, body)
    assert 400 <= status < 500 and message in answer["detail"], answer
    assert answer["detail"].startswith(message)


def test_a_body_that_is_not_sent_as_json_is_415(hardened):
    client = Client(hardened.port)
    for kind in ("text/plain", "application/xml", "application/x-www-form-urlencoded"):
        status, _, data = client.call("POST", "/embed", b'{"texts": ["a"]}', headers={"Content-Type": kind})
        assert status == 415 and "Content-Type: application/json" in json.loads(data)["detail"], kind
    for kind in ("application/json; charset=utf-8", "application/merge-patch+json"):
        assert client.call("POST", "/embed", b'{"texts": ["a"]}', headers={"Content-Type": kind})[0] == 200, kind
    # no Content-Type at all (a bare client): read as the JSON it is, not a 422 "not a valid dictionary"
    conn = http.client.HTTPConnection("127.0.0.1", hardened.port, timeout=30)
    conn.request("POST", "/embed", body=b'{"texts": ["a"]}', headers=client.headers)
    answer = conn.getresponse()
    assert answer.status == 200 and json.loads(answer.read())["dim"] > 0
    conn.close()


def test_scores_stay_in_the_heads_range(hardened):
    """Texts the model reads alike (no known words, or equal) score at most 1, not 1.0000001."""
    status, _, body = Client(hardened.port).json(
        "POST", "/similarity", {"pairs": [["???", "!!!"], ["\u0000", "hello"], ["same words", "same words"]]}
    )
    assert status == 200 and all(-1 <= r["similarity"] <= 1 for r in body["results"])


def test_head_requests_and_made_up_methods(hardened):
    client = Client(hardened.port)
    for path in ("/", "/health", "/metrics", "/docs"):
        assert client.call("HEAD", path)[0] == 200, path
    for i in range(3):
        sock = socket.create_connection(("127.0.0.1", hardened.port))
        sock.sendall(f"MADEUP{i} /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data, _ = read_all(sock, 10)
        sock.close()
        assert data.startswith(b"HTTP/1.1 4"), data[:100]
    methods = {
        dict(labels).get("method") for (name, labels) in metrics_of(hardened.port) if name == "siamese_requests_total"
    }
    assert "other" in methods and not any(m.startswith("MADEUP") for m in methods if m)


def test_health_answers_while_every_worker_is_busy(tmp_path):
    """96 requests for the 384-wide vectors of 256 texts each, at once: /health (async, on the
    event loop) still answers promptly, since the handlers write their JSON in their own threads.
    Before, the event loop converted each answer's vectors itself and /health waited behind them
    (on two AVX2 cores: ~22 s before, ~3.5 s after; what is left is the worker threads' share of the GIL)."""
    from siamese import ModelConfig

    words = ["claim", "policy", "annuity", "premium", "deductible", "life", "term", "rider"]
    texts = [" ".join(words[(i + j) % len(words)] for j in range(40)) for i in range(256)]
    path = SiameseModel.build(texts, ModelConfig(encoder="bow", dim=384)).save(tmp_path / "wide")
    body = json.dumps({"texts": texts}).encode()
    with serving(path) as base:
        port = int(base.rsplit(":", 1)[1])

        def one(_):
            client = Client(port)
            try:
                return client.call("POST", "/embed", body)[0]
            finally:
                client.close()

        with ThreadPoolExecutor(96) as pool:
            answers = pool.map(one, range(96))
            time.sleep(1.0)
            start = time.monotonic()
            status, _, _ = Client(port).call("GET", "/health")
            waited = time.monotonic() - start
            statuses = set(answers)
    assert status == 200 and waited < 8, waited
    assert statuses <= {200, 429}, statuses


def test_explanations_wait_in_the_queue_count():
    """An explanation encodes beside the batcher: admitted against max_queue like a queued request."""
    from siamese.serve.batcher import Overloaded

    batcher = Batcher(lambda texts: np.zeros((len(texts), 2)), BatchConfig(max_queue=1))
    with batcher.admitted():
        with pytest.raises(Overloaded, match="1 requests are waiting"):
            with batcher.admitted():
                pass
    with batcher.admitted():  # released: room again
        pass
    batcher.close()
    with pytest.raises(Overloaded, match="shutting down"):
        with batcher.admitted():
            pass


def test_a_closed_batcher_answers_the_queue_instead_of_encoding_it():
    """On a stop (SIGTERM), requests still queued are answered 'shutting down' at once: encoding a queue of
    abandoned requests kept a server busy for minutes past `docker stop`'s grace."""
    from siamese.serve.batcher import Overloaded

    calls = []

    def slow(texts):
        calls.append(len(texts))
        time.sleep(0.5)
        return np.zeros((len(texts), 2))

    batcher = Batcher(slow, BatchConfig(max_batch=1, wait_ms=0))

    def one(i):
        try:
            return batcher.encode([f"text {i}"])
        except Overloaded as e:
            return e

    with ThreadPoolExecutor(10) as pool:
        futures = [pool.submit(one, i) for i in range(10)]
        time.sleep(0.2)  # the first in its model call, nine queued
        started = time.monotonic()
        batcher.close()
        results = [f.result() for f in futures]
    assert time.monotonic() - started < 2 and len(calls) <= 2, calls
    refused = [r for r in results if isinstance(r, Overloaded)]
    assert len(refused) >= 8 and all("shutting down" in str(r) for r in refused)


# -- security headers, API keys ----------------------------------------------------------------


def test_security_headers_on_every_response(hardened):
    client = Client(hardened.port)
    responses = {
        "page": client.call("GET", "/"),
        "health": client.call("GET", "/health"),
        "missing": client.call("GET", "/nope"),
        "bad": client.call("POST", "/similarity", b"{"),
        "ok": client.call("POST", "/similarity", b'{"pairs": [["a b", "a c"]]}'),
    }
    for name, (_status, headers, _) in responses.items():
        assert headers["x-content-type-options"] == "nosniff", name
        assert headers["x-frame-options"] == "DENY", name
        assert headers["referrer-policy"] == "no-referrer", name
        assert "frame-ancestors 'none'" in headers["content-security-policy"], name
    page_csp = responses["page"][1]["content-security-policy"]
    assert "script-src 'sha256-" in page_csp and "unsafe-inline" not in page_csp and "connect-src 'self'" in page_csp
    assert responses["ok"][1]["content-security-policy"].startswith("default-src 'none'")


def test_api_keys(guarded):
    client = Client(guarded.port)
    for headers in (
        {},
        {"Authorization": "Bearer nope-nope-nope"},
        {"X-API-Key": KEYS[0][:-1]},
        {"Authorization": "Basic " + KEYS[0]},
    ):
        status, resp_headers, body = client.json("POST", "/embed", {"texts": ["hello"]}, headers=headers)
        assert status == 401 and "API key" in body["detail"] and resp_headers["www-authenticate"] == "Bearer"
    assert client.json("GET", "/metrics", None)[0] == 401
    assert client.json("GET", "/openapi.json", None)[0] == 401
    for headers in (
        {"Authorization": "Bearer " + KEYS[0]},
        {"authorization": "bearer " + KEYS[1]},
        {"X-API-Key": KEYS[1]},
    ):
        status, _, body = client.json("POST", "/embed", {"texts": ["hello"]}, headers=headers)
        assert status == 200 and len(body["embeddings"]) == 1
    assert client.call("GET", "/")[0] == 200 and client.json("GET", "/health")[0] == 200  # open


def test_api_keys_from_the_environment(small_calibrated):
    with serving(small_calibrated.path, None, env={"SIAMESE_API_KEYS": " env-key-0001 ,env-key-0002"}) as base:
        port = int(base.rsplit(":", 1)[1])
        client = Client(port)
        assert client.json("POST", "/embed", {"texts": ["x"]})[0] == 401
        assert client.json("POST", "/embed", {"texts": ["x"]}, headers={"X-API-Key": "env-key-0002"})[0] == 200


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--api-key", "short"], "at least 8"),
        (["--max-queue", "0"], "--max-queue"),
        (["--max-batch", "0"], "--max-batch"),
        (["--log-level", "loud"], "--log-level"),
    ],
)
def test_bad_serve_options_are_one_line_errors(small_calibrated, args, fragment):
    proc = subprocess.run(
        [str(SCRIPT), "serve", str(small_calibrated.path), "--port", "1", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: ") and fragment in proc.stderr and proc.stderr.count("\n") == 1


def test_an_address_that_cannot_be_listened_on_is_a_one_line_error(small_calibrated):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        for args, fragment in (
            (["--port", str(port)], "in use"),
            (["--host", "no.such.host.invalid"], "cannot listen"),
            (["--port", "70000"], "65535"),
        ):
            proc = subprocess.run(
                [str(SCRIPT), "serve", str(small_calibrated.path), *args], capture_output=True, text=True, timeout=120
            )
            assert proc.returncode == 2 and fragment in proc.stderr, (args, proc.stderr)
            if args[0] == "--port" and args[1] != "70000":
                assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1


# -- back-pressure and batching ----------------------------------------------------------------


def test_full_queue_answers_429_with_retry_after(guarded):
    auth = {"X-API-Key": KEYS[0]}

    def one(i):
        client = Client(guarded.port, auth)
        try:
            return client.json("POST", "/similarity", {"pairs": [[f"question {i}", "another question"]]})
        finally:
            client.close()

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(one, range(8)))
    statuses = sorted(status for status, _, _ in answers)
    assert statuses.count(200) >= 2 and statuses.count(429) >= 1 and set(statuses) <= {200, 429}, statuses
    busy = next((h, b) for s, h, b in answers if s == 429)
    assert busy[0]["retry-after"] == "1" and "busy" in busy[1]["detail"]


def test_concurrent_requests_share_model_calls_and_answer_the_same(hardened, small_calibrated):
    model = SiameseModel.load(small_calibrated.path)
    pairs = [[f"how do I claim insurance number {i}?", f"how can I make claim {i}?"] for i in range(32)]

    def one(i):
        client = Client(hardened.port)
        try:
            return client.json("POST", "/similarity", {"pairs": [pairs[i]]})
        finally:
            client.close()

    before = metric_value(hardened.port, "siamese_batch_requests_count")
    before_sum = metric_value(hardened.port, "siamese_batch_requests_sum")
    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(one, range(32)))
    calls = metric_value(hardened.port, "siamese_batch_requests_count") - before
    requests = metric_value(hardened.port, "siamese_batch_requests_sum") - before_sum
    assert requests == 32 and calls < 32  # some model calls served several requests
    expected = model.similarity_pairwise([a for a, _ in pairs], [b for _, b in pairs])
    assert [body["results"][0]["similarity"] for _, _, body in answers] == pytest.approx(expected.tolist(), abs=1e-5)


def test_batcher_keeps_each_request_apart(small_calibrated):
    """In process: results per request equal the model's own; a request the tokenizer rejects
    fails alone, not its batch-mates; with batching off each request is its own model call."""
    model = SiameseModel.load(small_calibrated.path)
    batches = []
    texts = [[f"text number {i}", "what is a deductible"] for i in range(12)] + [["bad \ud800 text"]]
    for enabled in (True, False):
        batches.clear()
        batcher = Batcher(
            model.encode,
            BatchConfig(enabled=enabled, wait_ms=200),
            on_batch=lambda waits, n: batches.append(len(waits)),
        )

        def one(t, batcher=batcher):
            try:
                return batcher.encode(t)
            except Exception as e:
                return e

        with ThreadPoolExecutor(13) as pool:
            results = list(pool.map(one, texts))
        batcher.close()
        for t, got in zip(texts[:-1], results[:-1]):
            assert np.allclose(got, model.encode(t), atol=1e-6)
        assert isinstance(results[-1], Exception)
        if enabled:
            assert max(batches) > 1
        else:
            assert batches == [1] * 13


# -- metrics and the access log ---------------------------------------------------------------


def metrics_of(port: int) -> dict:
    status, headers, data = Client(port).call("GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(data.decode())
        for s in family.samples
    }


def metric_value(port: int, name: str, **labels) -> float:
    return sum(v for (n, ls), v in metrics_of(port).items() if n == name and set(labels.items()) <= set(ls))


def test_metrics_and_access_log(hardened):
    client = Client(hardened.port)
    before = metrics_of(hardened.port)
    for _ in range(3):
        assert client.json("POST", "/similarity", {"pairs": [["a cat", "a dog"]]})[0] == 200
    assert client.call("POST", "/similarity", b'{"pairs": NaN}')[0] == 422
    assert client.call("GET", "/no/such/page")[0] == 404
    after = metrics_of(hardened.port)

    def grew(name, **labels):
        key = lambda d: sum(v for (n, ls), v in d.items() if n == name and set(labels.items()) <= set(ls))  # noqa: E731
        return key(after) - key(before)

    assert grew("siamese_requests_total", route="/similarity", method="POST", status="200") == 3
    assert grew("siamese_requests_total", route="/similarity", status="422") == 1  # refused before routing
    assert grew("siamese_requests_total", route="other", status="404") == 1
    assert grew("siamese_request_seconds_count", route="/similarity") == 4
    assert grew("siamese_queue_wait_seconds_count") == 3
    assert grew("siamese_batch_texts_sum") == 6  # both sides of each pair
    log = hardened.log.read_text()
    assert f"serving {''}" in log and f"on http://127.0.0.1:{hardened.port} " in log
    lines = [line for line in log.splitlines() if "siamese.access" in line]
    assert any(line.endswith(" ms") and "POST /similarity 200 " in line for line in lines)
    assert any("GET /no/such/page 404 " in line for line in lines)
