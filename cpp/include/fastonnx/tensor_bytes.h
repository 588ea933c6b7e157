// Initializer bytes computed while they are written: a weight folded through a Transpose or a
// Cast is never materialized whole in memory; the writer asks for it chunk by chunk, each chunk
// computed from the borrowed torch memory (the bounded-memory promise for large models).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "fastonnx/types.h"

namespace fastonnx {

using ByteSink = std::function<void(const void* data, size_t size)>;

class TensorBytes {
 public:
  virtual ~TensorBytes() = default;
  virtual size_t size() const = 0;
  // Calls `sink` with consecutive chunks that together are the tensor's bytes.
  virtual void produce(const ByteSink& sink) const = 0;
};

// `data` (a row-major tensor of `shape` with elements of `element_size` bytes) permuted by `perm`.
std::shared_ptr<const TensorBytes> transposed_bytes(const void* data, std::shared_ptr<const void> owner,
                                                    int element_size, std::vector<int64_t> shape,
                                                    std::vector<int64_t> perm);

// `count` elements of type `from` at `data`, converted to `to` as ONNX's Cast does.
std::shared_ptr<const TensorBytes> cast_bytes(const void* data, std::shared_ptr<const void> owner, size_t count,
                                              ScalarType from, ScalarType to);

}  // namespace fastonnx
