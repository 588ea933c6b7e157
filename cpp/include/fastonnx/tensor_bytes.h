// Initializer bytes computed while they are written: a weight folded through a Transpose or a
// Cast is never materialized whole in memory; the writer asks for it a range at a time, each
// range computed from the borrowed torch memory (the bounded-memory promise for large models).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "fastonnx/types.h"

namespace fastonnx {

using ByteSink = std::function<void(const void* data, size_t size)>;

class TensorBytes {
 public:
  virtual ~TensorBytes() = default;
  virtual size_t size() const = 0;
  // Bytes [begin, end) of the tensor into `out`. Both are multiples of the element size, so
  // that ranges can be computed independently (and on another thread, see prefetch.h).
  virtual void fill(size_t begin, size_t end, uint8_t* out) const = 0;
  // A range length near `target` bytes that `fill` computes efficiently (whole rows of a
  // transposed matrix); a multiple of the element size. A tensor that computes larger ranges
  // faster (a transposed matrix) takes up to `most` bytes: the caller's memory for one range.
  virtual size_t chunk_bytes(size_t target, size_t most) const = 0;
  // Whether `fill` may compute several ranges of this tensor at once, on several threads, as
  // fast as one at a time: a quantized weight's rows. A transpose reads a strip of every input
  // row per range and drops the pages it has read (read_pages.h), so it runs alone.
  virtual bool independent_ranges() const { return false; }
  // Calls `sink` with consecutive chunks that together are the tensor's bytes, computed here.
  void produce(const ByteSink& sink) const;

  // Borrowed bytes of another dtype that this tensor converts element by element (a weight cast
  // while written): then a transpose of it is a cast of the transposed bytes, computed in one go.
  struct CastOf {
    const void* data;
    std::shared_ptr<const void> owner;
    ScalarType from;
  };
  virtual std::optional<CastOf> cast_of() const { return std::nullopt; }

  // The borrowed memory these bytes are computed from, when they are its elements converted (a
  // cast) and/or, for a matrix, its transpose (`dtype`: this tensor's element type): a weight
  // quantizer (quantized_bytes.h) then reads the weight as the model holds it.
  struct Borrowed {
    const void* data;
    std::shared_ptr<const void> owner;
    ScalarType dtype;                       // of the borrowed elements
    bool transposed;                        // these bytes are the transpose of a row-major matrix at `data`
    std::array<int64_t, 2> source_shape{};  // that matrix's, when `transposed`
  };
  virtual std::optional<Borrowed> borrowed(ScalarType /*dtype*/) const { return std::nullopt; }

  // The borrowed bytes `fill` reads: released once the tensor is written (read_pages.h).
  virtual std::span<const uint8_t> source() const = 0;
  // All of them, for a tensor computed from several (stacked_bytes).
  virtual std::vector<std::span<const uint8_t>> sources() const { return {source()}; }

  // Whether `other` computes the same bytes: from the same borrowed memory, the same way. Graphs
  // written into one data file (write_models) that fold a weight alike then share its bytes.
  virtual bool same_bytes(const TensorBytes& other) const = 0;
};

// Chunks computed at a time: large enough that writing is not call-bound, small enough to stay
// in cache and bounded in memory.
constexpr size_t kTensorChunkBytes = size_t{1} << 20;
// The largest range of a transposed matrix (see tensor_bytes.cpp): the `most` of a writer whose
// memory is not otherwise bounded by the model's size (prefetch.cpp's is).
constexpr size_t kLargestChunkBytes = size_t{64} << 20;

// `data` (a row-major tensor of `shape` with elements of `element_size` bytes) permuted by `perm`.
std::shared_ptr<const TensorBytes> transposed_bytes(const void* data, std::shared_ptr<const void> owner,
                                                    int element_size, std::vector<int64_t> shape,
                                                    std::vector<int64_t> perm);

// `parts` one after the other: a tensor concatenated along its first axis from tensors of one
// element size `element_size` (the packed weights of several MatMulNBits).
std::shared_ptr<const TensorBytes> stacked_bytes(std::vector<std::shared_ptr<const TensorBytes>> parts,
                                                 int element_size);

// `size` bytes at `data` as they are, in elements of `element_size` bytes.
std::shared_ptr<const TensorBytes> memory_bytes(const void* data, std::shared_ptr<const void> owner, size_t size,
                                                int element_size);

// `parts`, matrices of `rows` rows each, side by side: a matrix concatenated along its last axis
// (the float weights of several MatMuls packed into one, pack_matmuls.cpp).
std::shared_ptr<const TensorBytes> columns_bytes(std::vector<std::shared_ptr<const TensorBytes>> parts, int64_t rows);

// `count` elements of type `from` at `data`, converted to `to` as ONNX's Cast does.
std::shared_ptr<const TensorBytes> cast_bytes(const void* data, std::shared_ptr<const void> owner, size_t count,
                                              ScalarType from, ScalarType to);

// The elements of `source` (of type `from`) converted to `to`, a range at a time.
std::shared_ptr<const TensorBytes> cast_computed_bytes(std::shared_ptr<const TensorBytes> source, ScalarType from,
                                                       ScalarType to);

}  // namespace fastonnx
