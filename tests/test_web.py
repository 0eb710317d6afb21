"""The web page at /, in a real headless Chromium (Debian's chromium, driven by Playwright)."""

from __future__ import annotations

import shutil

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    if not shutil.which("chromium"):
        pytest.skip("Debian's chromium is not installed (make test installs it)")
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield b
        b.close()


def test_compare_two_questions(server, browser):
    base, model, _ = server
    page = browser.new_page()
    page.goto(base + "/")
    assert page.title().startswith("siamese")
    page.fill("#q1", "When will I see you?")
    page.fill("#q2", "When can I see you again?")
    page.click("#compare button")
    result = page.locator("#compare-result")
    result.locator(".verdict").wait_for()
    sim = float(model.similarity(["When will I see you?"], ["When can I see you again?"])[0])
    assert f"similarity {sim:.3f}" in result.inner_text()
    assert f"probability {100 * float(model.calibrator([sim])[0]):.0f}%" in result.inner_text()  # a calibrated model
    assert result.locator(".verdict").inner_text() == ("Duplicate" if sim > model.threshold else "Not a duplicate")
    page.close()


def test_search_shows_nearest_questions(server, browser):
    base, _, index = server
    page = browser.new_page()
    page.goto(base + "/")
    page.locator("#footer").filter(has_text="3000 questions indexed").wait_for()
    query = index.texts[7]
    page.fill("#query", query)
    page.click("#search button")
    items = page.locator("#search-result li")
    items.first.wait_for()
    assert items.count() == 5
    expected = [h.text for h in index.search(query, 5)[0]]
    shown = items.all_inner_texts()
    assert all(text in item for item, text in zip(shown, expected)), (shown, expected)
    assert "1.000" in shown[0]  # the indexed question itself
    page.close()


def test_errors_are_shown_not_swallowed(server, browser):
    page = browser.new_page()
    page.goto(server[0] + "/")
    page.fill("#q1", "   ")  # whitespace passes the browser's `required` check; the server rejects it
    page.fill("#q2", "something")
    page.click("#compare button")
    page.locator("#compare-result .error").wait_for()
    assert "empty" in page.locator("#compare-result").inner_text()
    page.close()


def test_usable_on_a_phone(server, browser):
    page = browser.new_page(viewport={"width": 375, "height": 740}, device_scale_factor=2)
    page.goto(server[0] + "/")
    # nothing wider than the screen; the buttons span the width for thumbs
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    box = page.locator("#compare button").bounding_box()
    assert box["width"] > 300
    page.close()


def test_csp_blocks_injected_scripts(server, browser):
    """The page's own script runs (it fills the footer), an injected inline one does not."""
    page = browser.new_page()
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(server[0] + "/")
    page.locator("#footer").filter(has_text="indexed").wait_for()
    ran = page.evaluate("""() => { const s = document.createElement('script'); s.textContent = 'window.injected = 1';
                                   document.body.append(s); return window.injected === 1; }""")
    assert ran is False and blocked
    page.close()
