#include "fastonnx/quantized_bytes.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>
#include <vector>

#include "fastonnx/numeric.h"

namespace fastonnx {

namespace {

float load_weight(ScalarType t, const uint8_t* p) {
  switch (t) {
    case ScalarType::Float:
      return load_unaligned<float>(p);
    case ScalarType::Half:
      return half_to_float(load_unaligned<uint16_t>(p));
    default:  // BFloat16, as quantize_weights.cpp admits only these three
      return bfloat16_to_float(load_unaligned<uint16_t>(p));
  }
}

// `v` rounded to `t`, as a Cast to it would.
float round_to(ScalarType t, float v) {
  switch (t) {
    case ScalarType::Half:
      return half_to_float(float_to_half(v));
    case ScalarType::BFloat16:
      return bfloat16_to_float(float_to_bfloat16(v));
    default:
      return v;
  }
}

// The blocks of a weight: their weights, scales (as stored in the scales' dtype, so that the
// quantized values round against the scale the runtime multiplies by) and packed codes.
class Blocks {
 public:
  Blocks(const WeightMatrix& w, BlockQuantization q, ScalarType scale_dtype)
      : w_(w), q_(q), scale_dtype_(scale_dtype), es_(static_cast<size_t>(element_size(w.dtype))) {}

  // Row `i`'s weights of block `b` into `out` (q.block floats, zero-padded past K).
  void load(int64_t i, int64_t b, float* out) const {
    const int64_t j0 = b * q_.block, j1 = std::min(w_.k, j0 + q_.block);
    const uint8_t* row = w_.data + static_cast<size_t>(i * w_.stride_n) * es_;
    for (int64_t j = j0; j < j1; ++j) {
      out[j - j0] = round_to(w_.model_dtype, load_weight(w_.dtype, row + static_cast<size_t>(j * w_.stride_k) * es_));
    }
    std::fill(out + (j1 - j0), out + q_.block, 0.0f);
  }

  float scale(const float* block) const {
    float m = 0.0f;
    for (int64_t j = 0; j < q_.block; ++j) {
      if (std::fabs(block[j]) > std::fabs(m)) m = block[j];
    }
    return round_to(scale_dtype_, m / -static_cast<float>(1 << (q_.bits - 1)));
  }

  void store_scale(float s, uint8_t* out) const { store_double(scale_dtype_, out, s); }

  // The stored codes (q + 2^(bits-1)) of one block, packed into q.blob_bytes() bytes.
  void pack(const float* block, float s, uint8_t* out) const {
    const int zero = 1 << (q_.bits - 1);
    const float inverse = s == 0.0f ? 0.0f : 1.0f / s;
    const auto code = [&](float v) {
      const float r = std::nearbyint(v * inverse);  // ties to even, the default rounding mode
      return static_cast<uint8_t>(std::clamp(static_cast<int>(r), -zero, zero - 1) + zero);
    };
    if (q_.bits == 8) {
      for (int64_t j = 0; j < q_.block; ++j) out[j] = code(block[j]);
      return;
    }
    for (int64_t j = 0; j < q_.block; j += 2) {
      out[j / 2] = static_cast<uint8_t>(code(block[j]) | (code(block[j + 1]) << 4));
    }
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
    return o.w_.data == w_.data && o.w_.dtype == w_.dtype && o.w_.model_dtype == w_.model_dtype && o.w_.n == w_.n && o.w_.k == w_.k &&
           o.w_.stride_n == w_.stride_n && o.w_.stride_k == w_.stride_k && o.q_.bits == q_.bits &&
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
    std::vector<float> block(static_cast<size_t>(blocks_.quantization().block));
    for (size_t row = begin / row_bytes_; row * row_bytes_ < end; ++row) {
      const size_t r0 = row * row_bytes_, from = std::max(begin, r0), to = std::min(end, r0 + row_bytes_);
      uint8_t* dst = out + (from - begin);
      if (from != r0 || to != r0 + row_bytes_) {
        partial.resize(row_bytes_);
        compute_row(static_cast<int64_t>(row), partial.data(), block.data());
        std::memcpy(dst, partial.data() + (from - r0), to - from);
      } else {
        compute_row(static_cast<int64_t>(row), dst, block.data());
      }
    }
  }

 protected:
  virtual void compute_row(int64_t i, uint8_t* out, float* block) const = 0;
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
  void compute_row(int64_t i, uint8_t* out, float* block) const override {
    const BlockQuantization q = blocks().quantization();
    for (int64_t b = 0; b < q.blocks(blocks().weight().k); ++b) {
      blocks().load(i, b, block);
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
  void compute_row(int64_t i, uint8_t* out, float* block) const override {
    const size_t es = static_cast<size_t>(element_size(blocks().scale_dtype()));
    for (int64_t b = 0; b < blocks().quantization().blocks(blocks().weight().k); ++b) {
      blocks().load(i, b, block);
      blocks().store_scale(blocks().scale(block), out + static_cast<size_t>(b) * es);
    }
  }
};

}  // namespace

std::shared_ptr<const TensorBytes> quantized_blocks(const WeightMatrix& w, BlockQuantization q, ScalarType scale_dtype) {
  return std::make_shared<QuantizedBlocks>(Blocks(w, q, scale_dtype));
}

std::shared_ptr<const TensorBytes> block_scales(const WeightMatrix& w, BlockQuantization q, ScalarType dtype) {
  return std::make_shared<BlockScales>(Blocks(w, q, dtype));
}

}  // namespace fastonnx
