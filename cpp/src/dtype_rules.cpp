#include "fastonnx/dtype_rules.h"

#include <string>
#include <unordered_map>

namespace fastonnx {

namespace {
using K = OutputDtypeRule::Kind;

// Ops whose first output is not simply of the type of their first input. Everything else
// (the elementwise, shape-preserving and data-movement ops) follows input 0.
const std::unordered_map<std::string_view, OutputDtypeRule>& exceptions() {
  static const std::unordered_map<std::string_view, OutputDtypeRule> table = {
      {"Shape", {K::Fixed, 0, ScalarType::Long, {}}},
      {"Size", {K::Fixed, 0, ScalarType::Long, {}}},
      {"ArgMax", {K::Fixed, 0, ScalarType::Long, {}}},
      {"ArgMin", {K::Fixed, 0, ScalarType::Long, {}}},
      {"NonZero", {K::Fixed, 0, ScalarType::Long, {}}},
      {"Equal", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"Less", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"LessOrEqual", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"Greater", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"GreaterOrEqual", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"Not", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"And", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"Or", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"Xor", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"IsNaN", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"IsInf", {K::Fixed, 0, ScalarType::Bool, {}}},
      {"Cast", {K::FromAttr, 0, ScalarType::Undefined, "to"}},
      {"CastLike", {K::FromInput, 1, ScalarType::Undefined, {}}},
      {"Where", {K::FromInput, 1, ScalarType::Undefined, {}}},
      {"ConstantOfShape", {K::Unknown, 0, ScalarType::Undefined, {}}},
      {"EyeLike", {K::Unknown, 0, ScalarType::Undefined, {}}},
  };
  return table;
}
}  // namespace

OutputDtypeRule output_dtype_rule(std::string_view op_type, int output) {
  if (output > 0) {
    // Second outputs that are indices.
    if (op_type == "TopK" || op_type == "MaxPool" || op_type == "Unique") return {K::Fixed, 0, ScalarType::Long, {}};
    if (op_type == "Split") return {K::FromInput, 0, ScalarType::Undefined, {}};
    if (op_type == "BatchNormalization" || op_type == "LayerNormalization" || op_type == "Dropout") {
      return {K::Unknown, 0, ScalarType::Undefined, {}};
    }
  }
  const auto& table = exceptions();
  auto it = table.find(op_type);
  return it == table.end() ? OutputDtypeRule{} : it->second;
}

}  // namespace fastonnx
