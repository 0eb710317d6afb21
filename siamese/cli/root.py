"""The ``siamese`` Typer app: every command, registered here in the order ``siamese --help`` lists them.

The commands live in one module per family (training, evaluation, corpus, serving; the emoji
sub-app in emoji.py); none of them imports this module, so there is no cycle. Each
command imports what it needs when it runs: loading the app costs Typer and nothing heavy."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any

# OpenMP threads that spin while they wait for each other burn the cores they wait for when other
# processes share them: MiniLM encoding on 2 threads of a loaded 2-core machine took 4-6x longer
# (and 5x the CPU time) than with waiting threads asleep. Read once, when torch loads: before
# any command imports it; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import typer  # noqa: E402

from . import corpus, data, evaluate, label, models, serve, train  # noqa: E402
from .declared import DeclaredCommand  # noqa: E402
from .emoji import emoji_app  # noqa: E402

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Siamese neural networks for semantic similarity.")

app.command(cls=DeclaredCommand)(train.train)  # generated from the declared options
app.command()(evaluate.evaluate)
app.command()(evaluate.predict)
app.command()(evaluate.calibrate)
app.command()(evaluate.score)
app.command("pretrained")(models.pretrained_model)
app.command()(corpus.encode)
app.command()(models.summary)
app.command()(evaluate.rank)
app.command("evaluate-answers")(evaluate.evaluate_answers)
app.command()(corpus.search)
app.command()(corpus.dedupe)
app.command()(serve.serve)
app.command()(label.label)
app.command("distill", cls=DeclaredCommand)(train.distill_command)
app.command()(models.export)
app.command()(data.formats)

index_app = typer.Typer(no_args_is_help=True, help="Build and extend duplicate-search indexes.")
index_app.command("build")(corpus.index_build)
index_app.command("add")(corpus.index_add)
app.add_typer(index_app, name="index")

app.add_typer(emoji_app, name="emoji")  # `siamese emoji ...`


class Stopped(BaseException):
    """SIGTERM or SIGINT while a command runs, raised in the main thread: every ``with`` and
    ``finally`` on the way out runs, so temporary files, locks and scratch folders are removed
    (not an Exception: nothing that handles errors catches it)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def _stop(signum, frame) -> None:
    if _inside_an_import(frame):  # a raise there was swallowed (CI) or aborted the process: later
        _deliver_again(signum)
        return
    for s in STOP_SIGNALS:  # the clean-up on the way out is short: a second signal does not cut it
        signal.signal(s, signal.SIG_IGN)
    raise Stopped(signum)


def _inside_an_import(frame) -> bool:
    """Whether the signal came while a module was being imported, or in the import system's own clean-up:
    a module lock's weak-reference callback reports what it raises as 'Exception ignored' and carries on,
    and torch's import runs Python under C++ that aborts the process on an exception it did not expect."""
    while frame is not None:
        if frame.f_code.co_filename.startswith("<frozen importlib."):
            return True
        frame = frame.f_back
    return False


def _deliver_again(signum: int) -> None:
    """The signal once more, a moment from now, to the main thread's handler (armed again); none once the
    command is done (see ``_after_command``): it ends with what it did."""
    if _done:
        return
    for s in STOP_SIGNALS:
        signal.signal(s, _stop)
    timer = threading.Timer(0.02, os.kill, (os.getpid(), signum))
    timer.daemon = True  # it never holds the process open
    timer.start()


def _unraisable(hook):
    """``sys.unraisablehook`` that takes back a Stopped raised where Python cannot pass it on (a ``__del__``,
    a weak-reference callback) and delivers the signal again, where the rest goes to ``hook``."""

    if getattr(hook, "takes_stopped", False):  # main() ran before in this process
        return hook

    def handle(unraisable) -> None:
        if isinstance(unraisable.exc_value, Stopped):
            _deliver_again(unraisable.exc_value.signum)
        else:
            hook(unraisable)

    handle.takes_stopped = True
    return handle


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_done = False  # the command has returned: no Python handler any more


def main(args: list[str] | None = None) -> None:
    """The console entry point: the app, with SIGTERM (a job scheduler's, ``docker stop``'s) handled
    as SIGINT is: what was being written is cleaned up, then exit 128 + the signal (130, 143)."""
    global _done
    _done = False
    for s in STOP_SIGNALS:
        signal.signal(s, _stop)
    sys.unraisablehook = _unraisable(sys.unraisablehook)
    code: int | str | None = 0
    try:
        try:
            try:
                code = _app(args)
            except SystemExit as e:
                code = e.code
        except Stopped as e:
            code = 128 + e.signum
            with contextlib.suppress(Exception):
                print(f"stopped by {signal.Signals(e.signum).name}", file=sys.stderr)
        _after_command()
    except Stopped as e:  # the signal came while the command's end was being handled: it is done
        code = 128 + e.signum
        _after_command()
    sys.exit(code)


def _app(args: list[str] | None) -> int:
    """The app, its usage mistakes (an unknown option, a value out of range, a missing argument) one line
    starting with ``error:``, as every other mistake is, where Click draws a box under a usage."""
    # Click's classes, or the copy of Click that newer Typers carry: found from one Typer exports
    usage_error = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
    click_exception: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "ClickException")
    help_asked: Any = getattr(sys.modules[usage_error.__module__], "NoArgsIsHelpError", ())
    try:
        done = app(args, standalone_mode=False)
    except help_asked as e:  # `siamese`, `siamese index`: the help, as asked
        from typer import rich_utils

        rich_utils.rich_format_error(e)
        return e.exit_code
    except click_exception as e:
        ctx = getattr(e, "ctx", None)
        where = ctx.command_path if ctx is not None else "siamese"
        message = " ".join(e.format_message().split())
        print(f"error: {where}: {message} (see {where} --help)", file=sys.stderr)
        return e.exit_code
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        return 1
    return done if isinstance(done, int) and not isinstance(done, bool) else 0  # typer.Exit(code): its code


def _after_command() -> None:
    """The command is done and its outputs are written: what it printed is flushed, and a signal from
    now on ends the process at once, by the system's default action. (A Python handler cannot be relied
    on here: during the interpreter's shutdown a signal woke a thread that then re-entered a finalizing
    interpreter, and the process aborted with a fatal error instead of exiting.)"""
    global _done
    _done = True
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    for s in STOP_SIGNALS:
        signal.signal(s, signal.SIG_DFL)
