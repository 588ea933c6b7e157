// Constant evaluation of single ONNX nodes whose inputs are constants, for the folding pass.
// Only what converters leave behind is covered: shape arithmetic on static shapes, reshapes,
// transposes and casts of weights (those computed lazily while writing), small elementwise
// arithmetic, and the masks and position tables models build from iotas (comparisons, Where,
// CumSum, GatherND, Sin/Cos). Anything else is left to onnxruntime.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "fastonnx/tensor_bytes.h"
#include "fastonnx/types.h"

namespace fastonnx {

// A constant input as the folder sees it.
struct ConstView {
  ScalarType dtype = ScalarType::Undefined;
  std::vector<int64_t> shape;
  const uint8_t* data = nullptr;  // null when the bytes are computed (a folded weight)
  bool model_tensor = false;      // a weight of the model (Initializer::model_tensor), not a constant the export made
  size_t count() const;
};

// One folded output: new bytes, the bytes of input `alias_of` under a new shape (a reshape), or
// bytes computed while writing (a large transpose or cast).
struct Folded {
  ScalarType dtype = ScalarType::Undefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  int alias_of = -1;
  std::shared_ptr<const TensorBytes> computed;
};

// What the folder needs to know of input `i` for computed results: its borrowed memory and owner,
// or its computed bytes.
struct ConstSource {
  const void* data = nullptr;
  std::shared_ptr<const void> owner;
  std::shared_ptr<const TensorBytes> computed;
};

// The outputs of `op` on constant `inputs` (an absent optional input is nullopt), or nullopt
// when the folder does not evaluate it.
std::optional<std::vector<Folded>> fold(std::string_view op, std::span<const Attr> attrs,
                                        std::span<const std::optional<ConstView>> inputs,
                                        std::span<const ConstSource> sources);

}  // namespace fastonnx
