// ONNX's type constraints on op inputs (generated from onnx.defs into onnx_types.cpp), which the
// Builder checks so it never writes a node ONNX does not define for the given element types.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "fastonnx/types.h"

namespace fastonnx {

struct FormalInput {
  uint8_t group;     // inputs of one group share an element type (an ONNX type parameter)
  uint64_t allowed;  // bit i set: ScalarType i is allowed
  bool variadic;
};

struct OpInputTypes {
  int since;
  std::span<const FormalInput> inputs;
};

// The constraints in force at `opset`, or nullptr for an op not in the standard domain.
const OpInputTypes* onnx_input_types(std::string_view op_type, int opset);

}  // namespace fastonnx
