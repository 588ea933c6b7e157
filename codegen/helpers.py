"""The signatures of the lowercase calls a mapping spec may make, the one place codegen reads
them from (model.HELPERS parses them). Each is written as a schema; ``op`` is the name of an
ONNX op (checked against onnx.defs), ``axes`` torch dims as ONNX axes (absent: every axis).

- Attribute helpers give an attribute's value; their C++ functions are ``helper_<name>``.
- Tensor helpers build nodes as a hand-written body would; their C++ functions have the
  helper's name and take the Builder first. Both are declared in cpp/include/fastonnx/helpers.h.
- Guard helpers read what the exporter knows, in `when:` only.
"""

from __future__ import annotations

# (role, signature); the roles are model.HelperRole's.
SIGNATURES: list[tuple[str, str]] = [
    # -- attributes ------------------------------------------------------------------------
    # ONNX pads from torch's symmetric per-dimension padding: [a, b] -> [a, b, a, b]
    ("attribute", "twice(int[]|SymInt[] padding) -> int[]"),
    # pads for a convolution's padding="same"/"valid"
    ("attribute", "conv_pads(str padding, Tensor weight, SymInt[] dilation) -> int[]"),
    # ConvTranspose pads and output_padding with torch's output_padding folded into the end pads
    # where it fits (onnxruntime rejects output_padding >= stride, torch does not).
    ("attribute", "transpose_pads(SymInt[] padding, SymInt[] output_padding) -> int[]"),
    ("attribute", "transpose_output_padding(SymInt[] padding, SymInt[] output_padding) -> int[]"),
    # -- guards ----------------------------------------------------------------------------
    ("guard", "rank(Tensor self) -> int"),  # static rank of a tensor
    ("guard", "len(int[] list) -> int"),  # length of a list argument
    ("guard", "is_floating(Tensor self) -> bool"),  # whether a tensor's dtype is a floating type
    # a tensor's dtype, compared with a torch dtype name: dtype(self) == "bool"
    ("guard", "dtype(Tensor self) -> ScalarType"),
]
