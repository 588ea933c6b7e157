// ONNX's type constraints (generated from onnx.defs into onnx_types.cpp): the Builder checks op
// inputs against them so it never writes a node ONNX does not define for the given element
// types, and reads off them the element type of every output it creates.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "fastonnx/types.h"

namespace fastonnx {

// The group of a variadic input whose items each have their own type (Loop's and Scan's carried
// values), so no type is shared.
constexpr uint8_t kOwnTypes = 0xFF;

struct FormalInput {
  uint8_t group;     // inputs of one group share an element type (an ONNX type parameter), or kOwnTypes
  uint64_t allowed;  // bit i set: ScalarType i is allowed
  bool variadic;
};

// An output's element type: the type of input `input` (-1: none) or `fixed`, unless the node
// sets attribute `attr` (Cast's `to`), which then names the type.
struct OutputType {
  int input;
  ScalarType fixed;
  std::string_view attr;
};

struct OpTypes {
  int since;
  std::span<const FormalInput> inputs;  // empty: not checked (sequence or optional inputs)
  std::span<const OutputType> outputs;
};

// The constraints in force at `opset`, or nullptr for an op not in the standard domain.
const OpTypes* onnx_types(std::string_view op_type, int opset);

}  // namespace fastonnx
