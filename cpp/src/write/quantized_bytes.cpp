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

// q of weight `w` in a block of scale s = 1 / `inverse` (`inverse` 0 for a zero scale), `zero` =
// 2^(bits-1): round_half_even(w / s), computed as w * (1 / s), clamped to [-zero, zero - 1].
inline float level(float w, float inverse, float zero) {
  // Adding and taking away 1.5 * 2^23 rounds a float of magnitude below 2^22 to an integer,
  // ties to even (the default rounding mode), as nearbyint does; |w / s| is at most 2^(bits-1)
  // here, plus rounding.
  constexpr float kRound = 12582912.0f;
  const float r = (w * inverse + kRound) - kRound;
  // max(-zero, r) is -zero for a NaN r (std::max returns its first operand unless the second
  // compares greater): a NaN weight becomes the lowest level, not undefined behaviour; both
  // compile to vector min/max, where fmin/fmax calls halved the speed.
  return std::min(zero - 1, std::max(-zero, r));
}

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
    load(element(i, 0), k, w_.stride_k, out, scratch);
    std::fill(out + k, out + row_floats(), 0.0f);
  }

  // `count` weights from `first` on, `stride` elements apart, into `out` as float32, as the
  // model holds them (model_dtype).
  void load(const uint8_t* first, size_t count, int64_t stride, float* out, Scratch& scratch) const {
    const uint8_t* contiguous = first;
    if (stride != 1) {  // gathered into consecutive elements first
      scratch.gathered.resize(count * es_);
      for (size_t j = 0; j < count; ++j)
        std::memcpy(scratch.gathered.data() + j * es_, first + j * static_cast<size_t>(stride) * es_, es_);
      contiguous = scratch.gathered.data();
    }
    auto* floats = reinterpret_cast<uint8_t*>(out);
    if (w_.model_dtype != w_.dtype && w_.model_dtype != ScalarType::Float) {
      // Rounded to the model's dtype first, as a Cast to it does; then widened.
      scratch.narrow.resize(count * static_cast<size_t>(element_size(w_.model_dtype)));
      convert_floats(w_.dtype, contiguous, w_.model_dtype, scratch.narrow.data(), count);
      convert_floats(w_.model_dtype, scratch.narrow.data(), ScalarType::Float, floats, count);
    } else {
      convert_floats(w_.dtype, contiguous, ScalarType::Float, floats, count);
    }
  }

  // W[i, j]'s bytes.
  const uint8_t* element(int64_t i, int64_t j) const {
    return w_.data + static_cast<size_t>(i * w_.stride_n + j * w_.stride_k) * es_;
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
    return scale_of(m);
  }

  // The scale of a block whose weight of largest magnitude is `m`, as stored.
  float scale_of(float m) const {
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
    uint8_t codes[BlockQuantization::kMaxBlock];
    for (int64_t j = 0; j < q_.block; ++j) codes[j] = static_cast<uint8_t>(level(block[j], inverse, zero) + zero);
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
  // Each row reads its own weights, and no range drops pages.
  bool independent_ranges() const override { return true; }
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

// W read in [k, n] order, as DequantizeLinear's x is laid out: band b is rows [b * block,
// (b + 1) * block) of it, one block of K for every output feature, and holds everything its
// values and scales are computed from. A range of bands is loaded in tiles of a few columns: a
// tile column is a run of the range's rows of W, which torch's Linear holds along K, so the weight
// is read once per range and not once per band (the strided reads of a transpose, tensor_bytes.cpp).
class Bands {
 public:
  explicit Bands(Blocks blocks) : blocks_(std::move(blocks)) {}

  int64_t count() const { return blocks_.quantization().blocks(blocks_.weight().k); }
  const Blocks& blocks() const { return blocks_; }

  // Calls each_tile(band, n0, width, rows, tile, scales) for the tiles of bands [b0, b1): `tile` holds
  // the band's `rows` weights (rows of W's [k, n] order) of output features [n0, n0 + width), one
  // row of `width` floats after the other, and `scales` their `width` scales as stored.
  template <typename Visit>
  void visit(int64_t b0, int64_t b1, Visit&& each_tile) const {
    const WeightMatrix& w = blocks_.weight();
    const int64_t block = blocks_.quantization().block;
    // Memory that holds W transposed ([k, n] row-major: a tile row is consecutive) is read a band
    // at a time in wide tiles; W as torch holds it in narrow tiles over the whole range.
    const bool rows_consecutive = w.stride_n == 1;
    const int64_t tile_width = rows_consecutive ? std::min(w.n, kWideTile) : std::min(w.n, kNarrowTile);
    const int64_t group = rows_consecutive ? 1 : b1 - b0;
    Blocks::Scratch scratch;
    std::vector<float> tile, column, largest(static_cast<size_t>(tile_width)), scales(largest.size());
    for (int64_t g0 = b0; g0 < b1; g0 += group) {
      const int64_t g1 = std::min(b1, g0 + group), k0 = g0 * block, rows = std::min(w.k, g1 * block) - k0;
      tile.resize(static_cast<size_t>(rows * tile_width));
      column.resize(static_cast<size_t>(rows));
      for (int64_t n0 = 0; n0 < w.n; n0 += tile_width) {
        const int64_t width = std::min(tile_width, w.n - n0);
        if (rows_consecutive) {
          for (int64_t r = 0; r < rows; ++r) {
            blocks_.load(blocks_.element(n0, k0 + r), static_cast<size_t>(width), 1, tile.data() + r * width, scratch);
          }
        } else {
          for (int64_t c = 0; c < width; ++c) {
            blocks_.load(blocks_.element(n0 + c, k0), static_cast<size_t>(rows), w.stride_k, column.data(), scratch);
            for (int64_t r = 0; r < rows; ++r)
              tile[static_cast<size_t>(r * width + c)] = column[static_cast<size_t>(r)];
          }
        }
        for (int64_t b = g0; b < g1; ++b) {
          const float* t = tile.data() + (b * block - k0) * width;
          const int64_t band_rows = std::min(block, w.k - b * block);
          tile_scales(t, band_rows, width, largest.data(), scales.data());
          each_tile(b, n0, width, band_rows, t, scales.data());
        }
      }
    }
  }

 private:
  static constexpr int64_t kWideTile = 1024, kNarrowTile = 64;

  // Each column's scale, as Blocks::scale computes it from the column's block: the largest
  // magnitude, then the first weight along K that has it, found by a pass from the last row up
  // (branch-free loops over a row that vectorize).
  void tile_scales(const float* t, int64_t rows, int64_t width, float* largest, float* scales) const {
    std::fill(largest, largest + width, 0.0f);
    std::fill(scales, scales + width, 0.0f);
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t c = 0; c < width; ++c) largest[c] = std::max(largest[c], std::fabs(t[r * width + c]));
    }
    for (int64_t r = rows - 1; r >= 0; --r) {
      for (int64_t c = 0; c < width; ++c) {
        const float v = t[r * width + c];
        scales[c] = std::fabs(v) == largest[c] ? v : scales[c];
      }
    }
    for (int64_t c = 0; c < width; ++c) scales[c] = blocks_.scale_of(scales[c]);
  }

  Blocks blocks_;
};

// A tensor computed a band at a time (Bands): ranges of whole bands are computed together,
// directly into the output; a range that cuts a band goes through a band buffer. Every band has
// band_bytes but the last, which may be shorter.
class BandsOf : public TensorBytes {
 public:
  BandsOf(Blocks blocks, size_t band_bytes, size_t size)
      : bands_(std::move(blocks)), band_bytes_(band_bytes), size_(size) {}

  size_t size() const override { return size_; }
  // Each band reads its strip of W's rows and drops no pages.
  bool independent_ranges() const override { return true; }
  size_t chunk_bytes(size_t target, size_t most) const override {
    // A few ranges per tensor: each reads a strip of every row of W (see Bands).
    target = std::max(target, std::min(size_ / kPasses, most));
    return std::max(band_bytes_, target / band_bytes_ * band_bytes_);
  }
  void fill(size_t begin, size_t end, uint8_t* out) const override {
    const size_t bands = static_cast<size_t>(bands_.count());
    std::vector<uint8_t> partial;
    for (size_t b = begin / band_bytes_; b < bands && b * band_bytes_ < end;) {
      const size_t start = b * band_bytes_, stop = std::min(size_, start + band_bytes_);
      if (begin <= start && stop <= end) {
        size_t last = b + 1;
        while (last < bands && std::min(size_, (last + 1) * band_bytes_) <= end) ++last;
        compute(static_cast<int64_t>(b), static_cast<int64_t>(last), out + (start - begin));
        b = last;
        continue;
      }
      partial.resize(stop - start);
      compute(static_cast<int64_t>(b), static_cast<int64_t>(b + 1), partial.data());
      const size_t from = std::max(begin, start), to = std::min(end, stop);
      std::memcpy(out + (from - begin), partial.data() + (from - start), to - from);
      ++b;
    }
  }

 protected:
  // Bands [b0, b1)'s bytes into `out`, one band after the other.
  virtual void compute(int64_t b0, int64_t b1, uint8_t* out) const = 0;
  const Bands& bands() const { return bands_; }
  const Blocks& blocks() const { return bands_.blocks(); }
  size_t band_bytes() const { return band_bytes_; }

 private:
  static constexpr size_t kPasses = 4;
  Bands bands_;
  size_t band_bytes_;
  size_t size_;
};

class QuantizedColumns final : public BandsOf {
 public:
  explicit QuantizedColumns(const Blocks& b)
      : BandsOf(b, static_cast<size_t>(b.quantization().block * b.weight().n * b.quantization().bits / 8),
                byte_size(b.quantization().bits == 4 ? ScalarType::Int4 : ScalarType::Char,
                          static_cast<size_t>(b.weight().k * b.weight().n))) {}

  // The weight's pages: released once written, as a transposed weight's are (read_pages.h).
  std::span<const uint8_t> source() const override { return blocks().extent(); }
  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const QuantizedColumns*>(&other);
    return o != nullptr && o->blocks().same(blocks());
  }

 private:
  void compute(int64_t b0, int64_t b1, uint8_t* out) const override {
    const int64_t n = blocks().weight().n;
    const int bits = blocks().quantization().bits;
    const float zero = static_cast<float>(1 << (bits - 1));
    // Zeroed first: the nibbles are or-ed in, and a last odd element leaves its byte's high half.
    std::memset(out, 0,
                std::min(size(), static_cast<size_t>(b1) * band_bytes()) - static_cast<size_t>(b0) * band_bytes());
    std::vector<float> inverse;
    std::vector<uint8_t> levels;
    bands().visit(b0, b1, [&](int64_t b, int64_t n0, int64_t width, int64_t rows, const float* t, const float* s) {
      inverse.resize(static_cast<size_t>(width));
      levels.resize(static_cast<size_t>(width));
      for (int64_t c = 0; c < width; ++c) inverse[c] = s[c] == 0.0f ? 0.0f : 1.0f / s[c];
      uint8_t* band = out + static_cast<size_t>(b - b0) * band_bytes();
      for (int64_t r = 0; r < rows; ++r) {
        const float* w = t + r * width;
        // Two's complement bytes, whose low four bits are the int4 value.
        for (int64_t c = 0; c < width; ++c) {
          levels[c] = static_cast<uint8_t>(static_cast<int8_t>(level(w[c], inverse[c], zero)));
        }
        const size_t first = static_cast<size_t>(r * n + n0);  // the band's element index
        if (bits == 8) {
          std::memcpy(band + first, levels.data(), levels.size());
        } else {
          put_nibbles(levels.data(), levels.size(), first, band);
        }
      }
    });
  }

  // 4-bit `values` as elements [first, first + count) of a zeroed packed tensor at `out`.
  static void put_nibbles(const uint8_t* values, size_t count, size_t first, uint8_t* out) {
    size_t i = 0;
    if (first % 2 == 1 && count > 0) {  // the high half of a byte the previous tile began
      out[first / 2] |= static_cast<uint8_t>((values[0] & 15) << 4);
      i = 1;
    }
    uint8_t* pairs = out + (first + i) / 2;
    for (; i + 1 < count; i += 2, ++pairs) {
      *pairs = static_cast<uint8_t>((values[i] & 15) | ((values[i + 1] & 15) << 4));
    }
    if (i < count) *pairs |= static_cast<uint8_t>(values[i] & 15);
  }
};

class ColumnScales final : public BandsOf {
 public:
  explicit ColumnScales(const Blocks& b)
      : BandsOf(
            b, static_cast<size_t>(b.weight().n * element_size(b.scale_dtype())),
            static_cast<size_t>(b.quantization().blocks(b.weight().k) * b.weight().n * element_size(b.scale_dtype()))) {
  }

  // None: the scales are small, and the weight's pages stay for its quantized values, written
  // next (quantize_weights.cpp adds the scales first).
  std::span<const uint8_t> source() const override { return {}; }
  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const ColumnScales*>(&other);
    return o != nullptr && o->blocks().same(blocks());
  }

 private:
  void compute(int64_t b0, int64_t b1, uint8_t* out) const override {
    const size_t es = static_cast<size_t>(element_size(blocks().scale_dtype()));
    bands().visit(b0, b1,
                  [&](int64_t b, int64_t n0, int64_t width, int64_t /*rows*/, const float* /*tile*/, const float* s) {
                    uint8_t* row = out + static_cast<size_t>(b - b0) * band_bytes() + static_cast<size_t>(n0) * es;
                    for (int64_t c = 0; c < width; ++c) blocks().store_scale(s[c], row + static_cast<size_t>(c) * es);
                  });
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

std::shared_ptr<const TensorBytes> quantized_columns(const WeightMatrix& w, BlockQuantization q,
                                                     ScalarType scale_dtype) {
  return std::make_shared<QuantizedColumns>(Blocks(w, q, scale_dtype));
}

std::shared_ptr<const TensorBytes> column_scales(const WeightMatrix& w, BlockQuantization q, ScalarType dtype) {
  return std::make_shared<ColumnScales>(Blocks(w, q, dtype));
}

}  // namespace fastonnx
