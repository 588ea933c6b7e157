// ONNX optionals: a value a scripted model may leave None (`Optional[Tensor]`, the TorchScript
// front end's), held or empty; an If or Loop returning one returns an optional too
// (Session::control_flow).
#include "common.h"
#include "converters_optional.h"

namespace fastonnx {
namespace {

constexpr int kOptionalOpset = 15;  // ONNX's Optional, optional types

void need_optionals(Builder& b) {
  if (b.opset() < kOptionalOpset) {
    b.fail("a value that may be None is an ONNX optional, which needs opset " + std::to_string(kOptionalOpset) +
           " or later");
  }
}

}  // namespace

namespace manual {

Value fastonnx_optional(Builder& b, Value x) {
  need_optionals(b);
  const Value out = b.op<"Optional">({x});
  b.mark_optional(out);
  return out;
}

// (`size` is the shape torch records for the value, which the converter does not compute)
Value fastonnx_optional_none(Builder& b, ScalarType dtype, SymIntList /*size*/) {
  need_optionals(b);
  const Value out = b.op<"Optional">(Attrs{Attr::tensor_type("type", dtype)});
  b.mark_optional(out);
  return out;
}

}  // namespace manual
}  // namespace fastonnx
