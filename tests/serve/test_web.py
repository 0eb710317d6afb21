"""The web page at /, in a real headless Chromium (Debian's chromium, driven by Playwright)."""

from __future__ import annotations

import pytest


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
    sim = float(model.similarity_pairwise(["When will I see you?"], ["When can I see you again?"])[0])
    assert f"similarity {sim:.3f}" in result.inner_text()
    assert f"probability of a duplicate {100 * float(model.calibrator([sim])[0]):.0f}%" in result.inner_text()
    assert result.locator(".verdict").inner_text() == ("Duplicate" if sim > model.threshold else "Not a duplicate")
    above = "is above" if sim > model.threshold else "is not above"
    assert f"similarity {sim:.3f} {above} the threshold {model.threshold:.3f}" in result.inner_text()  # plain words
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
    hits = index.search(query, 5)[0]
    shown = items.all_inner_texts()
    assert all(h.text in item for item, h in zip(shown, hits)), (shown, hits)
    assert [item.locator(".id").inner_text() for item in items.all()] == [f"id {h.id}" for h in hits]  # ids shown
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


DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_compare_highlights_the_words_that_drove_the_score(server, browser, viewport):
    base, model, _ = server
    first = "When will I see you?\nI miss my old friends from school."  # multi-line input is kept as typed
    second = "When can I see you again?"
    page = browser.new_page(viewport=viewport)
    page.goto(base + "/")
    page.fill("#q1", first)
    page.fill("#q2", second)
    assert page.locator("#explain").is_checked()
    page.click("#compare button")
    words = page.locator("#compare-result .explanation .explained").first.locator(".w")
    words.first.wait_for()
    result = page.locator("#compare-result").inner_text()
    sim = float(model.similarity_pairwise([first], [second])[0])
    assert f"similarity {sim:.3f}" in result
    assert f"probability of a duplicate {100 * float(model.calibrator([sim])[0]):.0f}%" in result
    expected = model.explain(first, second)
    assert words.all_inner_texts() == [w.word for w in expected.text1]
    # the weight is in each word's tooltip (not colour alone), the sign in its underline style
    for i, w in enumerate(expected.text1):
        span = words.nth(i)
        assert span.get_attribute("title") == f"weight {'+' if w.weight >= 0 else '−'}{abs(w.weight):.3f}"
        assert span.get_attribute("class") == ("w for" if w.weight >= 0 else "w against")
    top = max(expected.text2, key=lambda w: w.weight)
    assert f"Most weight: {top.word} (" in page.locator("#compare-result .top").nth(1).inner_text()
    assert "drops without the word" in result  # the LSTM is explained by occlusion, and the page says so
    # the strongest word is shaded most
    strongest = max(range(len(expected.text1)), key=lambda i: abs(expected.text1[i].weight))
    alphas = [
        float(words.nth(i).evaluate("e => getComputedStyle(e).backgroundColor").split(",")[-1].rstrip(")"))
        for i in range(len(expected.text1))
    ]
    assert max(range(len(alphas)), key=alphas.__getitem__) == strongest
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]  # no horizontal overflow
    page.close()


def test_compare_without_explanation(server, browser):
    page = browser.new_page()
    page.goto(server[0] + "/")
    page.fill("#q1", "How do I bake bread?")
    page.fill("#q2", "How is bread baked?")
    page.uncheck("#explain")
    page.click("#compare button")
    page.locator("#compare-result .verdict").wait_for()
    assert page.locator("#compare-result .explanation").count() == 0
    page.close()


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["desktop", "phone"])
def test_search_k_and_threshold_controls(server, browser, viewport):
    base, _, index = server
    page = browser.new_page(viewport=viewport)
    page.goto(base + "/")
    page.locator("#footer").filter(has_text="3000 questions indexed").wait_for()
    query = index.texts[11]
    page.fill("#query", query)
    page.fill("#k", "3")
    page.fill("#search-threshold", "0.99")
    page.click("#search button")
    items = page.locator("#search-result li")
    items.first.wait_for()
    expected = index.search(query, 3, threshold=0.99)[0]
    assert items.count() == 3
    assert [item.locator(".tag").count() == 1 for item in items.all()] == [h.duplicate for h in expected]
    assert expected[0].duplicate and not expected[-1].duplicate  # the question itself, and a weaker neighbour
    # a lower threshold and more results, on the same page
    page.fill("#k", "7")
    page.fill("#search-threshold", "-1")
    page.click("#search button")
    page.locator("#search-result li").nth(6).wait_for()
    assert page.locator("#search-result li").count() == 7
    assert all(item.locator(".tag").count() == 1 for item in page.locator("#search-result li").all())
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    page.close()


def test_links_to_the_api_docs(server, browser):
    page = browser.new_page()
    page.goto(server[0] + "/")
    link = page.locator("#api-docs")
    assert link.get_attribute("href") == "/docs"
    with page.expect_navigation():
        link.click()
    assert page.url == server[0] + "/docs"
    assert "siamese" in page.title()  # FastAPI's interactive docs page of this app
    # Swagger UI itself renders (its files come from this server, not a CDN: no internet here),
    # listing the routes of the OpenAPI schema.
    page.locator(".swagger-ui .info .title").filter(has_text="siamese").wait_for()
    page.locator(".opblock-summary-path", has_text="/similarity").first.wait_for()
    # Every file the page asks for comes from this server and none fails. A reload may abort a request the
    # first load still had in flight (the favicon, say: net::ERR_ABORTED); that is the browser, not a missing
    # file, so aborted ones are checked by fetching them again.
    page.wait_for_load_state("networkidle")
    requested, failed = [], []
    page.on("request", lambda r: requested.append(r.url))
    page.on("requestfailed", lambda r: failed.append((r.url, r.failure)))
    page.reload()
    page.locator(".opblock-summary-path", has_text="/search").first.wait_for()
    page.wait_for_load_state("networkidle")
    assert requested and all(url.startswith(server[0] + "/") for url in requested), requested
    assert all("ERR_ABORTED" in str(why) for _, why in failed), failed
    for url, _ in failed:
        assert page.request.get(url).status == 200, url
    assert any(url.endswith("/docs-files/swagger-ui-bundle.js") for url in requested), requested


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


def test_a_service_with_api_keys_asks_the_page_for_one(model_path, browser):
    from conftest import serving

    key = "web-page-key-2468"
    with serving(model_path, None, "--api-key", key) as base:
        page = browser.new_page()
        page.goto(base + "/")  # the page itself is open; /health says a key is needed
        page.locator("#key-form").wait_for(state="visible")
        page.fill("#q1", "When will I see you?")
        page.fill("#q2", "When can I see you again?")
        page.fill("#api-key", "wrong-key-0000")
        page.click("#key-form button")
        page.click("#compare button")
        page.locator("#compare-result .error").filter(has_text="refused").wait_for()
        page.fill("#api-key", key)
        page.click("#key-form button")
        page.click("#compare button")
        page.locator("#compare-result .verdict").wait_for()
        assert "similarity" in page.locator("#compare-result").inner_text()
        # kept for this tab only: a new page (a new tab's sessionStorage) asks again
        other = browser.new_page()
        other.goto(base + "/")
        other.locator("#key-form").wait_for(state="visible")
        other.close()
        page.close()


def test_placeholders_look_like_placeholders_and_the_threshold_says_what_it_is(server, browser, artifacts):
    base, model, index = server
    page = browser.new_page(viewport=DESKTOP)
    page.goto(base + "/")
    page.locator("#footer").filter(has_text="3000 questions indexed").wait_for()
    for field in ("#q1", "#q2", "#query"):
        assert page.locator(field).get_attribute("placeholder").startswith("Type ")  # not a question typed in
        style = page.locator(field).evaluate("e => getComputedStyle(e, '::placeholder').fontStyle")
        assert style == "italic"
    threshold = page.locator("#search-threshold")
    assert threshold.get_attribute("placeholder") == f"{model.threshold:.3f}"
    assert page.locator("label[for=search-threshold]").inner_text() == "Call it a duplicate above similarity"
    assert f"the model's threshold, {model.threshold:.3f}" in page.locator("#threshold-hint").inner_text()
    page.screenshot(path=str(artifacts / "service-empty.png"), full_page=True)
    page.fill("#q1", "When will I see you?")
    page.fill("#q2", "When can I see you again?")
    page.click("#compare button")
    page.locator("#compare-result .explanation").wait_for()
    page.fill("#query", index.texts[7])
    page.click("#search button")
    page.locator("#search-result li .id").first.wait_for()
    assert "marked duplicate: above the model's threshold" in page.locator("#search-result").inner_text()
    page.screenshot(path=str(artifacts / "service-answers.png"), full_page=True)
    page.close()
