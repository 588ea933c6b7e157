// Convolutions of any spatial rank and dtype, shared by the conv* converters and the backward
// of convolution.
#pragma once

#include <optional>
#include <vector>

#include "converters.h"

namespace fastonnx {

// torch's convolution with explicit ONNX pads [begin..., end...]; unbatched inputs allowed.
Value conv_nd(Builder& b, Value input, Value weight, const std::optional<Value>& bias, const SymIntList& stride,
              const std::vector<int64_t>& pads, const SymIntList& dilation, const SymInt& groups);
// torch's transposed convolution (weight laid out as (C_in, C_out/groups, *kernel)).
Value conv_transpose_nd(Builder& b, Value input, Value weight, const std::optional<Value>& bias,
                        const SymIntList& stride, const SymIntList& padding, const SymIntList& output_padding,
                        const SymIntList& dilation, const SymInt& groups);

}  // namespace fastonnx
