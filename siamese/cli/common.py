"""What every command family shares (emoji.py too): the common options, the
``error: ...`` / exit 2 wrapper, ``--out`` checks, pair reading and result printing.

Imports only Typer, siamese.errors and the declared options' help: a command module, and the emoji commands, import this
without importing the app (siamese/cli/root.py), so there is no cycle."""

from __future__ import annotations

import functools
import json
import math
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from ..config.run import DEVICE_HELP, FORMAT_HELP, LABEL_HELP, OVERWRITE_HELP, TEXT1_HELP, TEXT2_HELP
from ..errors import ConfigError, DataError, SiameseError

JsonOpt = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
FormatOpt = Annotated[str, typer.Option("--format", help=FORMAT_HELP)]
Text1Opt = Annotated[Optional[str], typer.Option("--text1", help=TEXT1_HELP)]
Text2Opt = Annotated[Optional[str], typer.Option("--text2", help=TEXT2_HELP)]
TextColumnOpt = Annotated[
    Optional[str],
    typer.Option(
        "--column",
        help=(
            "CSV/TSV column holding the texts (default: the one named like text, question, sentence, body, "
            "title...; never an id column)."
        ),
    ),
]
ReuseOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--reuse",
        help=(
            "A dedupe run or an index folder written with this model: the vectors of the texts it holds are taken "
            "from it instead of encoded again (another model's are refused). Writing over an earlier run or index "
            "of the same model reuses its vectors without this."
        ),
    ),
]
LabelOpt = Annotated[Optional[str], typer.Option("--label", help=LABEL_HELP)]
OverwriteOpt = Annotated[bool, typer.Option("--overwrite", help=OVERWRITE_HELP)]
OverwriteFileOpt = Annotated[
    bool,
    typer.Option(
        "--overwrite", help="Replace output files that already exist (by default an existing file is never replaced)."
    ),
]
DeviceOpt = Annotated[str, typer.Option("--device", help=DEVICE_HELP)]
EngineOpt = Annotated[
    str,
    typer.Option(
        "--engine",
        help=(
            "local (this process) or ray (a Ray cluster: Ray Data actors, one model each; "
            "pip install 'siamese-sim\\[ray]')."  # escaped: Typer's rich help reads [ray] as markup
        ),
    ),
]
AddressOpt = Annotated[
    Optional[str],
    typer.Option(
        "--address",
        help=(
            "--engine ray: the cluster to join (ray://HOST:10001 or HOST:6379; default: a local cluster on this "
            "machine's CPUs)."
        ),
    ),
]
TargetPrecisionOpt = Annotated[
    Optional[float],
    typer.Option(
        "--target-precision",
        help="Set the threshold to the lowest one reaching this precision on the pairs (error if none does).",
    ),
]
TargetRecallOpt = Annotated[
    Optional[float],
    typer.Option("--target-recall", help="Set the threshold to the highest one reaching this recall on the pairs."),
]

VerifyOpt = Annotated[
    Optional[Path],
    typer.Option(
        "--verify",
        metavar="MODEL",
        help=(
            "A stronger model that decides the pairs the first model is unsure of (a cascade): a bi-encoder "
            "(minilm, mpnet, a folder from `siamese pretrained`, or your fine-tuned model; each text it reads is "
            "encoded once) or a cross-encoder folder (train --cross). It decides at its own threshold (dedupe "
            "with a bi-encoder: the run's threshold is on its scale, by default its own but at least 0.9)."
        ),
    ),
]
VerifyBandOpt = Annotated[
    Optional[str],
    typer.Option(
        "--verify-band",
        metavar="WIDTH|auto|LABELS",
        help=(
            "With --verify: the pairs whose first-stage similarity is within WIDTH of the threshold are verified; "
            "above the band a pair is a duplicate, under it not. auto: the narrowest band whose verdicts agree with "
            "the verifier's own on 99% of its duplicates, chosen on a sample of the pairs. A labelled pair file "
            "(predict, score, serve): the band whose verdicts are the most accurate on its pairs (0 wide where "
            "the verifier does not help); pairs neither model was trained on. "
            "Default: where there are many pairs (dedupe, score) auto for a bi-encoder and 0.1 for a "
            "cross-encoder; 0.1 for predict and serve."
        ),
    ),
]
VerifyAllOpt = Annotated[
    bool, typer.Option("--verify-all", help="With --verify: every pair is verified, not only the band.")
]


def threshold_option(value: float | None) -> float | None:
    """Option callback for a threshold: finite and in [-1, 1] (:func:`siamese.decision.threshold.check_threshold`:
    NaN would reach the JSON output, 90 for 0.9 would call nothing a duplicate)."""
    from ..decision.threshold import check_threshold

    try:
        return None if value is None else check_threshold(value, "a threshold")
    except ConfigError as e:
        raise typer.BadParameter(str(e)) from None


def verify_band(
    verify, band: str | None, every: bool, *, sample: bool, labels: bool = True
) -> float | str | Path | None:
    """The band that --verify-band or --verify-all ask for: a width, "auto" (only where there are
    pairs to sample: ``sample``), a labelled pair file to choose it on (where the command takes one:
    ``labels``; :func:`labelled_band_of` reads it once the models are loaded) or None (every pair);
    not given: "auto" where there is a sample, else the fixed width (a command may then prefer the
    fixed width for a cross-encoder)."""
    from ..decision.cascade import FIXED_BAND

    if verify is None:
        given = [flag for flag, value in (("--verify-band", band), ("--verify-all", every)) if value]
        if given:
            raise ConfigError(f"{' and '.join(given)} go with --verify MODEL")
        return None
    if band is not None and every:
        raise ConfigError("give --verify-band or --verify-all, not both (--verify-all verifies every pair)")
    if every:
        return None
    if band is None:
        return "auto" if sample else FIXED_BAND
    if band.strip().lower() == "auto":
        if not sample:
            raise ConfigError(
                "--verify-band auto is chosen on a sample of many pairs, and this command has none to sample: "
                f"give a width (default {FIXED_BAND})"
            )
        return "auto"
    try:
        width = float(band)
    except ValueError:
        if Path(band).is_file():
            if not labels:
                raise ConfigError(
                    f"--verify-band {band}: a band chosen on labelled pairs is for predict, score and serve; "
                    "give a width or auto"
                ) from None
            return Path(band)
        raise ConfigError(
            f"--verify-band {band!r}: a width (such as 0.1), auto, or a labelled pair file (no such file)"
        ) from None
    if not math.isfinite(width) or width < 0:
        raise ConfigError(f"--verify-band {band!r}: a width must be a finite number of 0 or more")
    return width


def labelled_band_of(band, model, verifier, threshold: float | None = None):
    """``band`` as given, or, where it is a labelled pair file, the width of the band chosen on its
    pairs around ``threshold`` (:func:`siamese.decision.cascade.labelled_band`), said in one line on stderr."""
    if not isinstance(band, Path):
        return band
    from ..data.pairs import read_pairs
    from ..decision.cascade import labelled_band

    chosen = labelled_band(model, verifier, read_pairs(band), threshold=threshold)
    width = round(chosen.half_width or 0.0, 6)  # band_from_labels always gives both edges
    print(
        f"--verify-band {band}: ±{width:.2f} around the threshold is the most accurate band on its {chosen.sampled} "
        f"pairs (accuracy {chosen.agreement:.3f})" + ("; the verifier does not help there" if width == 0 else ""),
        file=sys.stderr,
    )
    return width


def text_argument(value: str, name: str) -> str:
    """A text from the command line: valid UTF-8 (the shell may pass any bytes) and not blank."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as e:
        raise DataError(
            f"{name}: not valid UTF-8 (byte {value[e.start].encode('utf-8', 'surrogateescape')!r} "
            f"at character {e.start})"
        ) from None
    if not value.strip():
        raise DataError(f"{name}: the text is empty")
    return value


def user_errors(fn):
    """Turn a SiameseError into one line on stderr and exit code 2 (no traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except SiameseError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(2) from None
        except OSError as e:  # unreadable input, full disk...: the file and the reason, on one line
            where = f"{e.filename}: " if e.filename else ""
            typer.echo(f"error: {where}{e.strerror or e}", err=True)
            raise typer.Exit(2) from None

    return wrapper


def check_out_folder(out: Path, overwrite: bool, kind: str = "model", inputs=()) -> None:
    """Refuse a bad --out folder before any work is done (saving checks it again); ``kind``: what
    the command writes ("model", "index", "dedupe run"), so it never replaces another kind; never
    equal to, holding or inside a file or folder the command reads (``inputs``: pass them all,
    the model folder included), even with --overwrite."""
    from ..io.atomic import check_not_input, check_target

    check_not_input(out, inputs)
    check_target(out, overwrite=overwrite, kind=kind)


def check_out_file(out: Path | None, overwrite: bool, inputs=()) -> None:
    """Refuse an --out file that exists (unless ``overwrite``) or is one of the command's inputs."""
    from ..io.atomic import check_file_target

    if out is not None:
        check_file_target(out, overwrite=overwrite, inputs=inputs)


def read_pair_file(path: Path, format: str, text1, text2, label):
    from ..data.pairs import read_pairs

    return read_pairs(path, format, text1=text1, text2=text2, label=label)


def emit(result: dict, as_json: bool, lines: list[str]) -> None:
    if as_json:
        typer.echo(json.dumps(result, ensure_ascii=False))  # emojis and texts stay readable characters
    else:
        typer.echo("\n".join(lines))
