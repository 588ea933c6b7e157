"""What the generation exports (``genai.py``, ``seq2seq.py``) share: a directory of graphs written
as one (to a temporary directory beside it, moved in at the end), the checkpoint's tokenizer
and configs copied beside the graphs, and the check that every axis the runtime varies is
dynamic in what was written."""

from __future__ import annotations

import inspect
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping

import torch

from ..errors import ArgumentError, ExportError

# What transformers' tokenizers and configs are saved as (PreTrainedTokenizer*.save_pretrained,
# PretrainedConfig and GenerationConfig): copied beside the graph when the checkpoint has them.
COPIED = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "added_tokens.json",
    "tokenizer.model",
    "spiece.model",
    "vocab.json",
    "vocab.txt",
    "merges.txt",
    "chat_template.jinja",
    "chat_template.json",
)


def on_meta(model: torch.nn.Module) -> bool:
    parameters = list(model.parameters())
    return bool(parameters) and all(p.is_meta for p in parameters)


def cache_argument(model: torch.nn.Module) -> str:
    """The forward's keyword for the KV cache: transformers 5.24 renamed ``past_key_values`` to
    ``cache`` (the old name still works, with a deprecation line)."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def check_checkpoint(model: torch.nn.Module, output: str, checkpoint) -> None:
    """The arguments' mistakes, before anything is traced."""
    if os.path.isfile(output):
        raise ArgumentError(f"{output} is a file: --genai (export_genai) writes a directory")
    if on_meta(model) and checkpoint is None:
        raise ArgumentError("the model's weights are on the meta device: give checkpoint= to stream them from")


def write_directory(
    output: str, checkpoint: str | os.PathLike | None, write: Callable[[str], None], *, prefix: str
) -> list[str]:
    """``write(scratch)`` fills a temporary directory beside ``output``; the checkpoint's tokenizer
    and configs it did not write are copied there, and everything is moved into ``output`` at the
    end: an export that fails writes nothing. Returns the paths written."""
    parent = os.path.dirname(os.path.abspath(output))
    os.makedirs(parent, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=prefix, dir=parent)
    try:
        write(scratch)
        if checkpoint is not None:
            for name in COPIED:
                source = os.path.join(checkpoint, name)
                if os.path.isfile(source) and not os.path.exists(os.path.join(scratch, name)):
                    shutil.copyfile(source, os.path.join(scratch, name))
        os.makedirs(output, exist_ok=True)
        written = []
        for name in sorted(os.listdir(scratch)):
            os.replace(os.path.join(scratch, name), os.path.join(output, name))
            written.append(os.path.join(output, name))
        return written
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def check_dynamic(path: str, axes: Mapping[str, tuple[int, ...]]) -> None:
    """Every axis the runtime varies (``axes``: graph input or output name -> its axes) is a
    named dimension in the file (torch.export's named Dims fail rather than specialize; this
    checks what was written)."""
    import onnx

    graph = onnx.load(path, load_external_data=False).graph
    for value in list(graph.input) + list(graph.output):
        dims = value.type.tensor_type.shape.dim
        fixed = [axis for axis in axes.get(value.name, ()) if not dims[axis].dim_param]
        if fixed:
            raise ExportError(f"`{value.name}` axes {fixed} were exported static ({dims}); they must be dynamic")
