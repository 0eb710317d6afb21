"""The labelling page in a real headless Chromium (Debian's chromium, driven by Playwright), by
keyboard alone: label, skip, undo, the server killed and started again, save."""

from __future__ import annotations

import csv

import pytest
from conftest import free_port
from test_label import TOPICS, call, corpus, labelling  # noqa: F401  (corpus: the fixture)

pytestmark = pytest.mark.slow

TOPIC = {t: k for k, texts in TOPICS.items() for t in texts}


def shown(page) -> tuple[str, str]:
    texts = page.locator("#pair-body .text")
    texts.first.wait_for()
    return texts.nth(0).inner_text(), texts.nth(1).inner_text()


def answers(page) -> int:
    return int(page.locator("#stats-body").get_attribute("data-answers"))


def press(page, key: str, expect: int) -> None:
    """Press ``key`` and wait until the page shows ``expect`` answers and the next pair."""
    before = page.locator("#pair-body").get_attribute("data-index")
    page.keyboard.press(key)
    wait_answers(page, expect, before)


def wait_answers(page, expect: int, before: str | None = None) -> None:
    # a function, not an expression: the page's CSP forbids eval, which an expression would need
    page.wait_for_function(
        """([expect, before]) => document.getElementById('stats-body').dataset.answers === expect
                                 && document.getElementById('pair-body').dataset.index !== before""",
        arg=[str(expect), before],
    )


def truth(page) -> str:
    a, b = shown(page)
    return "d" if TOPIC[a] == TOPIC[b] else "n"


def rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_label_undo_kill_resume_and_save_by_keyboard(corpus, browser, tmp_path):  # noqa: F811
    labels, port = tmp_path / "labels.csv", free_port()
    page = browser.new_page()
    with labelling(corpus / "model", corpus / "corpus.csv", labels, port=port) as (base, proc):
        page.goto(base + "/")
        shown(page)
        assert answers(page) == 0
        for n in range(1, 5):
            press(page, truth(page), n)
        assert len(rows(labels)) == 4  # each answer on disk before the page moved on
        press(page, "s", 4)  # skip: a new pair, no answer
        last = rows(labels)[-1]
        page.keyboard.press("u")
        wait_answers(page, 3)
        assert shown(page) == (last["text1"], last["text2"])  # the undone pair, to answer again
        assert len(rows(labels)) == 3
        press(page, truth(page), 4)
        proc.kill()  # SIGKILL: no chance to flush anything more
        proc.wait()
    before = rows(labels)
    assert len(before) == 4
    page.keyboard.press("d")  # the server is gone: the page says so, and nothing is lost
    page.locator("#status.error").wait_for()
    with labelling(corpus / "model", corpus / "corpus.csv", labels, port=port) as (base, _):
        page.reload()
        shown(page)
        assert answers(page) == 4 and rows(labels) == before  # resumed where it stopped
        n = 4
        while page.locator("#save").is_disabled():
            n += 1
            press(page, truth(page), n)
            assert n < 40, "the calibration never became possible"
        threshold = page.locator("#stats-body").inner_text()
        page.focus("#save")
        page.keyboard.press("Enter")  # Save, by keyboard too
        page.locator("#saved").filter(has_text="model saved to").wait_for()
        saved = page.locator("#saved").inner_text()
    from siamese import SiameseModel

    model = SiameseModel.load(tmp_path / "labels-model")
    assert f"threshold {model.threshold:.4f}" in saved
    assert (
        f"The threshold from your answers\n{model.threshold:.3f}:" in threshold
        or f"{model.threshold:.3f}:" in threshold
    )
    assert model.calibrator is not None and model.info["threshold_choice"]["answers"] == n
    assert len(rows(labels)) == n
    page.close()


def test_page_csp_blocks_injected_scripts(corpus, browser, tmp_path):  # noqa: F811
    page = browser.new_page()
    blocked = []
    page.on("console", lambda m: blocked.append(m.text) if "Content Security Policy" in m.text else None)
    with labelling(corpus / "model", corpus / "corpus.csv", tmp_path / "labels.csv") as (base, _):
        page.goto(base + "/")
        shown(page)  # the page's own script ran
        ran = page.evaluate("""() => { const s = document.createElement('script');
            s.textContent = 'window.injected = 1'; document.body.append(s); return window.injected === 1; }""")
        assert ran is False and blocked
        page.keyboard.press("Tab")  # the first stop is a control of the page
        assert page.evaluate("document.activeElement.tagName") in ("A", "BUTTON")
    page.close()


def test_the_page_in_plain_words_hides_the_guess_and_says_what_comes_next(corpus, browser, tmp_path, artifacts):  # noqa: F811
    labels = tmp_path / "labels.csv"
    page = browser.new_page(viewport={"width": 1100, "height": 900})
    with labelling(corpus / "model", corpus / "corpus.csv", labels) as (base, _):
        page.goto(base + "/")
        shown(page)
        guess = page.locator("#guess")
        assert guess.count() == 1 and guess.is_hidden()  # the model's guess is not shown before an answer
        place = page.locator("#pair-body .meta").first.inner_text()
        assert place.startswith("texts ") and " and " in place  # two rows of the corpus, not "ids 92 / 92"
        page.screenshot(path=str(artifacts / "label-first-pair.png"), full_page=True)
        before = page.locator("#pair-body").get_attribute("data-index")
        answered = truth(page)
        press(page, answered, 1)
        previous = page.locator("#previous").inner_text()
        said = "duplicate" if answered == "d" else "not a duplicate"
        assert previous.startswith(f"Previous pair: your answer, {said}, is saved.") and "The model guessed" in previous
        assert page.locator("#pair-body").get_attribute("data-index") != before
        page.check("#show-guess")  # the option: the guess before answering
        assert page.locator("#guess").is_visible()
        assert "the model's threshold" in page.locator("#guess").inner_text()  # no answers fit one yet
        page.uncheck("#show-guess")
        n = 1
        while page.locator("#save").is_disabled() or n < 12:
            n += 1
            press(page, truth(page), n)
            assert n < 60, "the calibration never became possible"
        stats = page.locator("#stats-body").inner_text()
        for words in (
            "The model's threshold",
            "The threshold from your answers",
            "(precision)",
            "(recall)",
            "candidate pairs as duplicates",
            "Probabilities",
        ):
            assert words in stats, (words, stats)
        for jargon in ("flags", "ECE", "fitted threshold", "blend", "platt"):
            assert jargon not in stats, (jargon, stats)
        enough = page.locator("#enough").inner_text()
        now = call(base, "/api/next?tab=check")[1]["stats"]  # what the page was given
        if now["flags"] == 0:  # this small model's answers may put the threshold above every pair
            assert enough.startswith("The threshold from your answers marks no candidate pair")
        elif now["more_answers"]:
            assert enough == f"About {now['more_answers']} more answers would pin the precision down to ±5 points."
        else:
            assert enough.startswith("Enough answers") if now["more_answers"] == 0 else "likely range" in enough
        page.check("#show-guess")
        assert "the threshold from your answers" in page.locator("#guess").inner_text()
        page.screenshot(path=str(artifacts / "label-answers.png"), full_page=True)
        page.click("#save")
        page.locator("#next-steps li").first.wait_for()
        steps = page.locator("#next-steps li").all_inner_texts()
        model_folder = str(tmp_path / "labels-model")
        assert steps[0].startswith(f"siamese dedupe {model_folder} --data {corpus / 'corpus.csv'}")
        assert any(step.startswith(f"siamese serve {model_folder}") for step in steps)
        page.screenshot(path=str(artifacts / "label-saved.png"), full_page=True)
    page.close()
