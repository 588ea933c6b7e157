#include "fastonnx/quantized_bytes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "fastonnx/convert_kernels.h"
#include "fastonnx/numeric.h"

namespace fastonnx {

namespace {

// The blocks of a weight: their weights, scales (as stored in the scales' dtype, so that the
// quantized values round against the scale the runtime multiplies by) and packed codes. A row is
// converted to float32 in one call (convert_kernels.h: vector code) and quantized in plain loops
// the compiler vectorizes: an 8B model has 8 billion weights, and a conversion call or a libm
// rounding call per weight made the quantization, not the disk, the export's bound.
class Blocks {
 public:
  Blocks(const WeightMatrix& w, BlockQuantization q, ScalarType scale_dtype)
      : w_(w), q_(q), scale_dtype_(scale_dtype), es_(static_cast<size_t>(element_size(w.dtype))) {}

  // The floats a row is computed in: blocks(K) * block, zero-padded past K.
  size_t row_floats() const { return static_cast<size_t>(q_.blocks(w_.k) * q_.block); }

  // Buffers a row goes through, kept from row to row.
  struct Scratch {
    std::vector<uint8_t> gathered, narrow;
  };

  // Row `i` of W into `out` (row_floats() floats), as the model holds it (model_dtype).
  void load_row(int64_t i, float* out, Scratch& scratch) const {
    const size_t k = static_cast<size_t>(w_.k);
    const uint8_t* row = w_.data + static_cast<size_t>(i * w_.stride_n) * es_;
    const uint8_t* contiguous = row;
    if (w_.stride_k != 1) {  // gathered into consecutive elements first
      scratch.gathered.resize(k * es_);
      for (size_t j = 0; j < k; ++j)
        std::memcpy(scratch.gathered.data() + j * es_, row + j * static_cast<size_t>(w_.stride_k) * es_, es_);
      contiguous = scratch.gathered.data();
    }
    auto* floats = reinterpret_cast<uint8_t*>(out);
    if (w_.model_dtype != w_.dtype && w_.model_dtype != ScalarType::Float) {
      // Rounded to the model's dtype first, as a Cast to it does; then widened.
      scratch.narrow.resize(k * static_cast<size_t>(element_size(w_.model_dtype)));
      convert_floats(w_.dtype, contiguous, w_.model_dtype, scratch.narrow.data(), k);
      convert_floats(w_.model_dtype, scratch.narrow.data(), ScalarType::Float, floats, k);
    } else {
      convert_floats(w_.dtype, contiguous, ScalarType::Float, floats, k);
    }
    std::fill(out + k, out + row_floats(), 0.0f);
  }

  float scale(const float* block) const {
    // The largest magnitude first (a loop that vectorizes), then the first weight that has it.
    float largest = 0.0f;
    for (int64_t j = 0; j < q_.block; ++j) largest = std::max(largest, std::fabs(block[j]));
    float m = 0.0f;
    for (int64_t j = 0; j < q_.block; ++j) {
      if (std::fabs(block[j]) == largest) {
        m = block[j];
        break;
      }
    }
    const float s = m / -static_cast<float>(1 << (q_.bits - 1));
    switch (scale_dtype_) {
      case ScalarType::Half:
        return half_to_float(float_to_half(s));
      case ScalarType::BFloat16:
        return bfloat16_to_float(float_to_bfloat16(s));
      default:
        return s;
    }
  }

  void store_scale(float s, uint8_t* out) const { store_double(scale_dtype_, out, s); }

  // The stored codes (q + 2^(bits-1)) of one block, packed into q.blob_bytes() bytes.
  void pack(const float* block, float s, uint8_t* out) const {
    const float zero = static_cast<float>(1 << (q_.bits - 1));
    const float inverse = s == 0.0f ? 0.0f : 1.0f / s;
    // Adding and taking away 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer,
    // ties to even (the default rounding mode), as nearbyint does; |w / s| is at most 2^(bits-1)
    // here, plus rounding.
    constexpr float kRound = 12582912.0f;
    uint8_t codes[BlockQuantization::kMaxBlock];
    for (int64_t j = 0; j < q_.block; ++j) {
      const float r = (block[j] * inverse + kRound) - kRound;
      // max(-zero, r) is -zero for a NaN r (std::max returns its first operand unless the second
      // compares greater): a NaN weight becomes the lowest code, not undefined behaviour; both
      // compile to vector min/max, where fmin/fmax calls halved the speed.
      codes[j] = static_cast<uint8_t>(std::min(zero - 1, std::max(-zero, r)) + zero);
    }
    if (q_.bits == 8) {
      std::memcpy(out, codes, static_cast<size_t>(q_.block));
      return;
    }
    for (int64_t j = 0; j < q_.block; j += 2) out[j / 2] = static_cast<uint8_t>(codes[j] | (codes[j + 1] << 4));
  }

  const WeightMatrix& weight() const { return w_; }
  BlockQuantization quantization() const { return q_; }
  ScalarType scale_dtype() const { return scale_dtype_; }

  std::span<const uint8_t> extent() const {
    if (w_.n == 0 || w_.k == 0) return {};
    const int64_t last = (w_.n - 1) * w_.stride_n + (w_.k - 1) * w_.stride_k;
    return {w_.data, static_cast<size_t>(last + 1) * es_};
  }

  bool same(const Blocks& o) const {
    return o.w_.data == w_.data && o.w_.dtype == w_.dtype && o.w_.model_dtype == w_.model_dtype && o.w_.n == w_.n &&
           o.w_.k == w_.k && o.w_.stride_n == w_.stride_n && o.w_.stride_k == w_.stride_k && o.q_.bits == q_.bits &&
           o.q_.block == q_.block && o.scale_dtype_ == scale_dtype_;
  }

 private:
  WeightMatrix w_;
  BlockQuantization q_;
  ScalarType scale_dtype_;
  size_t es_;
};

// A tensor whose rows (one per output feature) are computed whole: ranges of whole rows are
// written directly, a range that cuts a row goes through a row buffer.
class RowsOf : public TensorBytes {
 public:
  RowsOf(Blocks blocks, size_t row_bytes) : blocks_(std::move(blocks)), row_bytes_(row_bytes) {}

  size_t size() const override { return static_cast<size_t>(blocks_.weight().n) * row_bytes_; }
  size_t chunk_bytes(size_t target, size_t /*most*/) const override {
    return std::max(row_bytes_, target / row_bytes_ * row_bytes_);
  }
  void fill(size_t begin, size_t end, uint8_t* out) const override {
    std::vector<uint8_t> partial;
    Blocks::Scratch scratch;
    std::vector<float> weights(blocks_.row_floats());
    for (size_t row = begin / row_bytes_; row * row_bytes_ < end; ++row) {
      const size_t r0 = row * row_bytes_, from = std::max(begin, r0), to = std::min(end, r0 + row_bytes_);
      uint8_t* dst = out + (from - begin);
      blocks_.load_row(static_cast<int64_t>(row), weights.data(), scratch);
      if (from != r0 || to != r0 + row_bytes_) {
        partial.resize(row_bytes_);
        compute_row(weights.data(), partial.data());
        std::memcpy(dst, partial.data() + (from - r0), to - from);
      } else {
        compute_row(weights.data(), dst);
      }
    }
  }

 protected:
  // One row's bytes from its weights (Blocks::row_floats() floats).
  virtual void compute_row(const float* weights, uint8_t* out) const = 0;
  const Blocks& blocks() const { return blocks_; }

 private:
  Blocks blocks_;
  size_t row_bytes_;
};

class QuantizedBlocks final : public RowsOf {
 public:
  explicit QuantizedBlocks(Blocks b)
      : RowsOf(b, static_cast<size_t>(b.quantization().blocks(b.weight().k) * b.quantization().blob_bytes())) {}

  // The weight's pages: released once written, as a transposed weight's are (read_pages.h).
  std::span<const uint8_t> source() const override { return blocks().extent(); }
  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const QuantizedBlocks*>(&other);
    return o != nullptr && o->blocks().same(blocks());
  }

 private:
  void compute_row(const float* weights, uint8_t* out) const override {
    const BlockQuantization q = blocks().quantization();
    for (int64_t b = 0; b < q.blocks(blocks().weight().k); ++b) {
      const float* block = weights + b * q.block;
      blocks().pack(block, blocks().scale(block), out + b * q.blob_bytes());
    }
  }
};

class BlockScales final : public RowsOf {
 public:
  explicit BlockScales(Blocks b)
      : RowsOf(b, static_cast<size_t>(b.quantization().blocks(b.weight().k) * element_size(b.scale_dtype()))) {}

  // None: the scales are small, and the weight's pages stay for its quantized values, written
  // next (quantize_weights.cpp adds the scales first).
  std::span<const uint8_t> source() const override { return {}; }
  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const BlockScales*>(&other);
    return o != nullptr && o->blocks().same(blocks());
  }

 private:
  void compute_row(const float* weights, uint8_t* out) const override {
    const size_t es = static_cast<size_t>(element_size(blocks().scale_dtype()));
    const BlockQuantization q = blocks().quantization();
    for (int64_t b = 0; b < q.blocks(blocks().weight().k); ++b) {
      blocks().store_scale(blocks().scale(weights + b * q.block), out + static_cast<size_t>(b) * es);
    }
  }
};

}  // namespace

std::shared_ptr<const TensorBytes> quantized_blocks(const WeightMatrix& w, BlockQuantization q,
                                                    ScalarType scale_dtype) {
  return std::make_shared<QuantizedBlocks>(Blocks(w, q, scale_dtype));
}

std::shared_ptr<const TensorBytes> block_scales(const WeightMatrix& w, BlockQuantization q, ScalarType dtype) {
  return std::make_shared<BlockScales>(Blocks(w, q, dtype));
}

}  // namespace fastonnx
