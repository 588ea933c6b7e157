// Reductions shared beyond cpp/converters/reduction.cpp.
#pragma once

#include <optional>
#include <vector>

#include "common.h"

namespace fastonnx {

// The vector p-norm (torch.linalg.vector_norm) of `x` over `axes` (every axis when absent):
// p = 0 counts nonzeros, +-inf is the largest or smallest magnitude.
Value vector_norm(Builder& b, Value x, double p, const std::optional<std::vector<int64_t>>& axes, bool keepdim);

}  // namespace fastonnx
