"""``siamese pretrained``, ``export`` and ``summary``: a model folder made from a pretrained encoder,
exported for ONNX Runtime, or described. Each parses its options, calls the Python API and prints."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import (
    DeviceOpt,
    FormatOpt,
    JsonOpt,
    LabelOpt,
    OverwriteFileOpt,
    OverwriteOpt,
    Text1Opt,
    Text2Opt,
    check_out_file,
    emit,
    user_errors,
)


@user_errors
def export(
    model_dir: Annotated[Path, typer.Argument(help="Model folder (a transformer with the cosine head).")],
    out: Annotated[
        Path,
        typer.Option(
            "--out", help="Folder to write: config.json, tokenizer.json, model.onnx (only if the export succeeds)."
        ),
    ],
    format: Annotated[str, typer.Option("--format", help="onnx: the encoder runs in ONNX Runtime.")] = "onnx",
    quantize: Annotated[
        Optional[str],
        typer.Option(
            help=(
                "int8: dynamic int8 quantisation of the matmuls (faster; their weights 4x smaller, the token table "
                "not: MiniLM 90 to 59 MB; vectors slightly off)."
            )
        ),
    ] = None,
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Export a model for fast CPU inference; every command opens the exported folder like any model folder."""
    from ..models.export import export_folder

    report = export_folder(model_dir, out, format=format, quantize=quantize, overwrite=overwrite)
    emit(report.result, as_json, report.lines)


@user_errors
def pretrained_model(
    source: Annotated[
        str,
        typer.Argument(
            help=(
                "minilm (all-MiniLM-L6-v2), mpnet (all-mpnet-base-v2; make mpnet), or a local sentence-transformers "
                "or Hugging Face model folder."
            )
        ),
    ],
    out: Annotated[Path, typer.Option("--out", help="Model folder to write.")],
    val_data: Annotated[
        Optional[list[Path]],
        typer.Option(
            "--val-data",
            help=(
                "Labelled pairs to choose the threshold on (repeat for several files). Default: the shared "
                "validation sets (msrp-val, sts-dev, sick-trial)."
            ),
        ),
    ] = None,
    max_length: Annotated[
        Optional[int],
        typer.Option(min=1, help="Tokens kept per text (default: the folder's max_seq_length, else 128)."),
    ] = None,
    threshold_metric: Annotated[
        str, typer.Option(help="What the threshold maximises on the validation pairs: accuracy or f1.")
    ] = "accuracy",
    format: FormatOpt = "auto",
    text1: Text1Opt = None,
    text2: Text2Opt = None,
    label: LabelOpt = None,
    device: DeviceOpt = "auto",
    overwrite: OverwriteOpt = False,
    as_json: JsonOpt = False,
):
    """Save a pretrained sentence encoder, untrained, as a Siamese model (cosine head, threshold chosen on pairs)."""
    from ..models.sentence_encoder import pretrained_run

    report = pretrained_run(
        source,
        out,
        val_data=val_data,
        max_length=max_length,
        metric=threshold_metric,
        format=format,
        text1=text1,
        text2=text2,
        label=label,
        device=device,
        overwrite=overwrite,
    )
    emit(report.result, as_json, report.lines)


@user_errors
def summary(
    model_dir: Annotated[Path, typer.Argument(help="Model folder.")],
    png: Annotated[Optional[Path], typer.Option("--png", help="Also draw the architecture into this PNG file.")] = None,
    overwrite: OverwriteFileOpt = False,
    as_json: JsonOpt = False,
):
    """Layers, output shapes and parameter counts of a model (like Keras's model.summary())."""
    from dataclasses import asdict

    from ..models.siamese import SiameseModel
    from ..models.summary import draw, summary_rows

    check_out_file(png, overwrite, inputs=[model_dir])

    model = SiameseModel.load(model_dir, device="cpu")  # a table of shapes: no GPU needed
    if png is not None:
        draw(model, png)
    rows = [asdict(r) for r in summary_rows(model)]
    total = sum(p.numel() for m in (model.encoder, model.head) for p in m.parameters())
    result = {
        "encoder": model.config.encoder,
        "head": model.config.head,
        "loss": model.config.loss,
        "layers": rows,
        "total_params": total,
        "png": str(png) if png else None,
    }
    emit(result, as_json, [model.summary()] + ([f"architecture drawn to {png}"] if png else []))
