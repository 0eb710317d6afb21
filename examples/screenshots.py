"""The README's screenshots: an ``evaluate --report`` page and the web page with an explanation.

    SIAMESE_DATA=../shared/data .venv/bin/python examples/screenshots.py [--out docs/images]

MiniLM as it is (threshold chosen on the shared validation sets, calibrated on MSRP val), its
report on MSRP test, and ``siamese serve`` with 3,000 InsuranceQA questions indexed, drawn by
Debian's headless Chromium through Playwright. Writes report.png and web-explain.png.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from siamese import datasets, read_texts
from siamese.decision.calibration import calibrate
from siamese.evaluation.metrics import evaluate_pairs
from siamese.evaluation.report import write_report
from siamese.models.sentence_encoder import from_pretrained
from siamese.search import DuplicateIndex

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "docs" / "images")
    parser.add_argument("--port", type=int, default=8765)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = from_pretrained("minilm", datasets.validation_sets())
        calibrate(model, datasets.load("msrp-val"))
        model.save(tmp / "minilm")
        report = write_report(
            tmp / "report.html",
            evaluate_pairs(model, datasets.load("msrp-test")),
            title="minilm on msrp-test",
            model="models/minilm",
            data="msrp/msr-para-test.tsv",
        )
        index = DuplicateIndex(model)
        index.add(read_texts(datasets.data_root() / "insuranceqa/questions.csv", "question")[:3000])
        index.save(tmp / "index")
        server = subprocess.Popen(
            [
                str(Path(sys.executable).parent / "siamese"),
                "serve",
                str(tmp / "minilm"),
                "--index",
                str(tmp / "index"),
                "--port",
                str(args.port),
            ]
        )
        base = f"http://127.0.0.1:{args.port}"
        try:
            wait_for(base + "/health")
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS, headless=True)
                shoot_report(browser, report.as_uri(), args.out / "report.png")
                shoot_page(browser, base, args.out / "web-explain.png")
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=30)


def wait_for(url: str, seconds: float = 120) -> None:
    deadline = time.time() + seconds
    while True:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            if time.time() > deadline:
                raise
            time.sleep(0.5)


def shoot_report(browser, url: str, out: Path) -> None:
    """The report's top: metrics, confusion matrix and the plots."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(url)
    bottom = page.locator("#false-positives").bounding_box()["y"]
    page.screenshot(path=str(out), full_page=True, clip={"x": 0, "y": 0, "width": 1280, "height": bottom - 8})
    page.close()


def shoot_page(browser, base: str, out: Path) -> None:
    page = browser.new_page(viewport={"width": 900, "height": 800})
    page.goto(base + "/")
    page.fill("#q1", "How can I cancel my car insurance policy online?")
    page.fill("#q2", "What is the process to cancel auto insurance?")
    page.click("#compare button")
    page.locator("#compare-result .explanation .w").first.wait_for()
    page.fill("#query", "Can I cancel my car insurance at any time?")
    page.fill("#k", "3")
    page.click("#search button")
    page.locator("#search-result li").first.wait_for()
    page.screenshot(path=str(out), full_page=True)
    page.close()


if __name__ == "__main__":
    main()
