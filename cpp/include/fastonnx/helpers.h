// Helpers that mapping specs may call by name (lowercase calls, codegen/model.py HELPERS).
#pragma once

#include <string>
#include <vector>

#include "fastonnx/builder.h"

namespace fastonnx {

// ONNX pads list [begin..., end...] from torch's symmetric per-dimension padding.
std::vector<int64_t> helper_twice(Builder& b, const SymIntList& padding);
std::vector<int64_t> helper_twice(Builder& b, const std::vector<int64_t>& padding);
// torch's padding="same"/"valid" as ONNX auto_pad. torch puts the odd extra pad at the end,
// which is ONNX's SAME_UPPER.
std::string helper_auto_pad(Builder& b, const std::string& padding);

}  // namespace fastonnx
