"""Serving a model over HTTP (guide: docs/guides/serving.md): start `siamese serve` on 127.0.0.1,
send one /similarity request, stop the server.

Run: python examples/serve.py
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import siamese


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until_up(base: str, server: subprocess.Popen, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"the server stopped: {server.stderr.read()}")
        try:
            with urllib.request.urlopen(base + "/health", timeout=2):
                return
        except OSError:
            time.sleep(0.5)
    raise SystemExit("the server did not answer /health in time")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = siamese.from_pretrained("minilm").save(Path(tmp) / "model")  # any model folder serves
        port = free_port()
        command = [sys.executable, "-m", "siamese", "serve", str(folder), "--host", "127.0.0.1", "--port", str(port)]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        try:
            base = f"http://127.0.0.1:{port}"
            wait_until_up(base, server)
            body = {"pairs": [["When will I see you?", "When can I see you again?"]]}
            request = urllib.request.Request(
                base + "/similarity", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
            )
            with urllib.request.urlopen(request, timeout=60) as response:
                print(json.dumps(json.loads(response.read()), indent=2))
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
