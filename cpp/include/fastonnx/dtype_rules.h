// How the element type of an ONNX op's output follows from its inputs and attributes, for
// the ops converters emit. The Builder uses it so every value it hands out has a dtype.
#pragma once

#include <string_view>

#include "fastonnx/types.h"

namespace fastonnx {

struct OutputDtypeRule {
  enum class Kind : uint8_t { FromInput, Fixed, FromAttr, Unknown };
  Kind kind = Kind::FromInput;
  int input = 0;
  ScalarType fixed = ScalarType::Undefined;
  std::string_view attr;
};

OutputDtypeRule output_dtype_rule(std::string_view op_type, int output);

}  // namespace fastonnx
