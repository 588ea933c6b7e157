// Shared pieces of the indexing and scatter converters (indexing.cpp, scatter.cpp).
#pragma once

#include <string_view>
#include <vector>

#include "common.h"

namespace fastonnx {

// The sizes of `x` along `dims` as a 1-D int64 tensor: a constant when they are static.
Value sizes_of(Builder& b, Value x, const std::vector<int64_t>& dims);
// Transpose by `perm`; `x` itself when perm keeps every dim in place.
Value transpose(Builder& b, Value x, const std::vector<int64_t>& perm);
// The permutation that undoes `perm`.
std::vector<int64_t> inverse(const std::vector<int64_t>& perm);

// ONNX ScatterElements or ScatterND (`op`) with `reduction` ("none", "add", "mul", "max",
// "min"). Reductions exist from opset 16 (add, mul) and 18 (max, min); below that this fails
// clearly. Dtypes onnxruntime has no reduction kernel for are reduced in a dtype that holds
// their values exactly and cast back.
Value scatter(Builder& b, OpType op, Value data, Value indices, Value updates, std::string_view reduction,
              Attrs attrs = {});

}  // namespace fastonnx
