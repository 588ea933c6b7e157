// Standard ONNX ops named at compile time. A converter writes `b.op<"Clip">({x, lo, hi})`: the
// name is looked up in the table codegen writes from onnx.defs (onnx_ops.h), so an op ONNX does
// not have, or a braced input list longer or shorter than any opset from MIN_OPSET on allows, is
// a compile error rather than a ConversionError when some model first reaches that line. Which
// opset defines the op, and the inputs' element types, are checked when the node is built.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string_view>

#include "onnx_ops.h"

namespace fastonnx {

// The arity entry of a standard ONNX op, or nullptr (usable in constant expressions).
constexpr const OnnxArity* onnx_arity(std::string_view name) {
  const auto* end = std::end(kOnnxArities);
  const auto* it = std::lower_bound(std::begin(kOnnxArities), end, name,
                                    [](const OnnxArity& a, std::string_view n) { return a.name < n; });
  return it != end && it->name == name ? it : nullptr;
}

// A string literal as a template argument: `op<"Relu">`.
template <size_t N>
struct OpName {
  char chars[N]{};
  consteval OpName(const char (&s)[N]) { std::copy_n(s, N, chars); }  // NOLINT(google-explicit-constructor)
  constexpr std::string_view view() const { return {chars, N - 1}; }
};

// The table entry of a standard op named at compile time, checking that `n_inputs` inputs fit it
// (kAnyCount: a list built at run time, checked when the node is built). Either mistake is a
// compile error: a throw in a constant evaluation, its message shown in the diagnostic.
inline constexpr size_t kAnyCount = static_cast<size_t>(-1);
template <OpName Name>
consteval const OnnxArity& standard_op(size_t n_inputs = kAnyCount) {
  const OnnxArity* a = onnx_arity(Name.view());
  if (a == nullptr) throw "not a standard ONNX op (cpp/generated/onnx_ops.h lists them)";  // NOLINT
  if (n_inputs != kAnyCount && (n_inputs < a->min_inputs || n_inputs > a->max_inputs)) {
    throw "wrong number of inputs for this ONNX op (cpp/generated/onnx_ops.h)";  // NOLINT
  }
  return *a;
}

// An op chosen at run time among ops named at compile time (`is_max ? "ArgMax" : "ArgMin"`, or a
// helper's parameter, `compare(b, "Equal", ...)`): each name is checked where it is written; the
// input count is checked when the node is built.
struct OpType {
  const OnnxArity* arity;
  consteval OpType(const char* name) : arity(onnx_arity(name)) {  // NOLINT(google-explicit-constructor)
    // A throw in a constant evaluation is the compile error; the message shows in it.
    if (arity == nullptr) throw "not a standard ONNX op (cpp/generated/onnx_ops.h lists them)";  // NOLINT
  }
  constexpr std::string_view name() const { return arity->name; }
  constexpr bool operator==(const OpType& o) const { return arity == o.arity; }
};

}  // namespace fastonnx
