"""A Keras-like summary of a Siamese model (layers, output shapes, parameter counts) and a
drawing of its architecture with matplotlib."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn.utils.rnn import PackedSequence

from ..io.atomic import atomic_file

SAMPLE_LENGTHS = (5, 9)  # two sample batches: the dimensions that change between them are the time axis


@dataclass
class Row:
    name: str
    kind: str
    shape: str
    params: int


def _shown_modules(root: nn.Module, prefix: str) -> list[tuple[str, nn.Module]]:
    """The layers worth a row: the root's children, with containers (ModuleLists, whole
    pretrained models, stacks of layers) opened one level at a time."""
    out = []
    for name, child in root.named_children():
        full = f"{prefix}.{name}" if prefix else name
        opens = (
            isinstance(child, (nn.ModuleList, nn.Sequential))
            or hasattr(child, "config")
            or any(isinstance(c, nn.ModuleList) for c in child.children())
        )
        out.extend(_shown_modules(child, full) if opens else [(full, child)])
    return out


def _first_tensor(output):
    if isinstance(output, PackedSequence):
        return output.data.unsqueeze(0)  # packed: (tokens, width); shown with a variable axis
    if isinstance(output, torch.Tensor):
        return output
    if isinstance(output, (tuple, list)) and output:
        return _first_tensor(output[0])
    if hasattr(output, "last_hidden_state"):
        return output.last_hidden_state
    return None


def _output_shapes(model, modules: list[tuple[str, nn.Module]]) -> dict[str, str]:
    """Run the encoder and head on two sample batches and record each shown layer's output shape;
    the batch axis and any axis that follows the text length print as None."""
    seen: dict[str, list[tuple[int, ...]]] = {}
    hooks = [
        m.register_forward_hook(
            lambda _m, _i, out, name=name: seen.setdefault(name, []).append(
                tuple(t.shape) if (t := _first_tensor(out)) is not None else ()
            )
        )
        for name, m in modules
    ]
    try:
        with torch.inference_mode():
            model.encoder.eval()
            model.head.eval()
            for length in SAMPLE_LENGTHS:
                token = 5 % max(model.vectorizer.vocab_size, 6)
                ids = torch.full((2, length), token, dtype=torch.long, device=model.device)
                lengths = torch.tensor([length, length - 1], device=model.device)
                vectors = model.encoder(ids, lengths).float()
                model.head(vectors[:1], vectors[1:])
    finally:
        for h in hooks:
            h.remove()
    shapes = {}
    for name, (first, *rest) in ((n, s) for n, s in seen.items() if s):
        second = rest[0] if rest else first
        dims = ["None" if i == 0 or a != b else str(a) for i, (a, b) in enumerate(zip(first, second))]
        shapes[name] = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"
    return shapes


HEAD_FORMULAS = {
    "CosineHead": "cos(a, b)",
    "ManhattanHead": "exp(-|a - b|_1)",
    "L1Head": "1 - |a - b| -> Dense(1, sigmoid)",
    "ConcatHead": "[a, b] -> Dense(1, sigmoid)",
    "SymmetricHead": "[|a - b|, a*b] -> Dense(1, sigmoid)",
}


def summary_rows(model) -> list[Row]:
    """One row per encoder layer, one for the pooled encoding, one for the head."""
    modules = [(f"encoder.{n}", m) for n, m in _shown_modules(model.encoder, "")]
    shapes = _output_shapes(model, modules + [("encoder", model.encoder), ("head", model.head)])
    rows = [
        Row(name, type(m).__name__, shapes.get(name, "?"), sum(p.numel() for p in m.parameters()))
        for name, m in modules
    ]
    pooling = getattr(model.encoder, "pooling", "")
    norm = ", L2" if getattr(model.encoder, "normalize", False) else ""
    rows.append(Row(f"encoding ({pooling}{norm})", "Pooling", shapes.get("encoder", "?"), 0))
    kind = type(model.head).__name__
    rows.append(
        Row(
            f"head: {HEAD_FORMULAS.get(kind, kind)}",
            kind,
            shapes.get("head", "?"),
            sum(p.numel() for p in model.head.parameters()),
        )
    )
    return rows


def summary(model, width: int = 98) -> str:
    """The table, like Keras ``model.summary()``; the encoder is shared by both texts."""
    rows = summary_rows(model)
    params = [p for m in (model.encoder, model.head) for p in m.parameters()]
    total = sum(p.numel() for p in params)
    trainable = sum(p.numel() for p in params if p.requires_grad)
    c = model.config
    line = "_" * width
    out = [
        f'Siamese model: encoder "{c.encoder}" (shared by both texts), head "{c.head}", trained with loss "{c.loss}"',
        line,
        f"{'Layer (type)':<52}{'Output Shape':<30}{'Param #':>16}",
        "=" * width,
        f"{'text_a, text_b (Input)':<52}{'(None, None)':<30}{0:>16,}",
    ]
    for r in rows:
        label = r.name if r.name.startswith(("head", "encoding")) else f"{r.name} ({r.kind})"
        out.append(f"{label[:51]:<52}{r.shape:<30}{r.params:>16,}")
    out += [
        "=" * width,
        f"Total params: {total:,}",
        f"Trainable params: {trainable:,}",
        f"Non-trainable params: {total - trainable:,}",
        line,
    ]
    return "\n".join(out)


def draw(model, path: str | os.PathLike) -> Path:
    """Draw the architecture: two inputs → the shared encoder's layers → head → score (PNG)."""
    # A bare Figure on the Agg canvas: no pyplot, so the caller's backend and figures are untouched.
    from ..io.extras import require

    require("report", "matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.patches import Rectangle

    rows = summary_rows(model)
    encoder_rows, head_rows = rows[:-1], rows[-1:]  # the pooled encoding is the last encoder row
    n = len(encoder_rows) + 3
    fig = Figure(figsize=(7, 0.75 * n + 0.8))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.set_xlim(0, 10)
    ax.set_ylim(0.2, n + 0.5)
    ax.axis("off")

    def box(x, y, w, text, color):
        ax.add_patch(Rectangle((x - w / 2, y - 0.3), w, 0.6, facecolor=color, edgecolor="#333", linewidth=1))
        ax.text(x, y, text, ha="center", va="center", fontsize=8)

    def arrow(x0, y0, x1, y1):
        ax.annotate("", xy=(x1, y1 + 0.3), xytext=(x0, y0 - 0.3), arrowprops=dict(arrowstyle="->", color="#333"))

    top = n - 0.2
    box(2.5, top, 3.2, "text A", "#e8eef7")
    box(7.5, top, 3.2, "text B", "#e8eef7")
    y = top
    for i, r in enumerate(encoder_rows):
        y_next = top - 1 - i
        for x in (2.5, 7.5):
            label = r.name if r.kind == "Pooling" else r.kind
            box(x, y_next, 4.2, f"{label}  {r.shape}", "#fdf1d6")
            arrow(x, y, x, y_next)
        y = y_next
    ax.text(5, (top - 1 + y) / 2, "shared\nweights", ha="center", va="center", fontsize=8, color="#8a5a00")
    head_y = y - 1
    box(5, head_y, 6, f"{head_rows[0].name.removeprefix('head: ')}  → score", "#dff3e3")
    arrow(2.5, y, 4.0, head_y)
    arrow(7.5, y, 6.0, head_y)
    ax.set_title(f"encoder {model.config.encoder} · head {model.config.head} · loss {model.config.loss}", fontsize=10)
    fig.tight_layout()
    path = Path(path)
    with atomic_file(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return path
