// Helpers that mapping specs may call by name (lowercase calls, codegen/model.py HELPERS).
#pragma once

#include <string>
#include <vector>

#include "fastonnx/builder.h"

namespace fastonnx {

// ONNX pads list [begin..., end...] from torch's symmetric per-dimension padding.
std::vector<int64_t> helper_twice(Builder& b, const SymIntList& padding);
std::vector<int64_t> helper_twice(Builder& b, const std::vector<int64_t>& padding);
// Explicit ONNX pads for torch's padding="same"/"valid" of a convolution with `weight`. ONNX's
// auto_pad would say the same, but onnxruntime rejects SAME_* with dilation; torch puts the odd
// extra pad at the end.
std::vector<int64_t> helper_conv_pads(Builder& b, const std::string& padding, Value weight, const SymIntList& dilation);

// ConvTranspose: torch's output_padding extends the output at the end, which is the same as
// cropping less there; only what the end padding cannot absorb stays as output_padding.
std::vector<int64_t> helper_transpose_pads(Builder& b, const SymIntList& padding, const SymIntList& output_padding);
std::vector<int64_t> helper_transpose_output_padding(Builder& b, const SymIntList& padding,
                                                     const SymIntList& output_padding);

}  // namespace fastonnx
