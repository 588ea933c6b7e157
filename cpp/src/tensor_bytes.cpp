#include "fastonnx/tensor_bytes.h"

#include <algorithm>
#include <cstring>

#include "fastonnx/numeric.h"

namespace fastonnx {
namespace {

// Chunks handed to the sink: large enough that writing is not call-bound, small enough to stay
// in cache and bounded in memory.
constexpr size_t kChunkBytes = size_t{1} << 20;

class Transposed final : public TensorBytes {
 public:
  Transposed(const void* data, std::shared_ptr<const void> owner, int element_size, std::vector<int64_t> shape,
             std::vector<int64_t> perm)
      : data_(static_cast<const uint8_t*>(data)), owner_(std::move(owner)), element_size_(element_size),
        shape_(std::move(shape)), perm_(std::move(perm)) {
    count_ = 1;
    for (int64_t d : shape_) count_ *= static_cast<size_t>(d);
  }

  size_t size() const override { return count_ * element_size_; }

  void produce(const ByteSink& sink) const override {
    if (count_ == 0) return;
    if (shape_.size() == 2) {
      produce_matrix(sink);
    } else {
      produce_general(sink);
    }
  }

 private:
  // out[r][c] = in[c][r], in blocks of output rows so both sides are read and written in cache
  // lines. The copy is typed by element size: a memcpy call per element made a large model's
  // transposed weights cost three times their plain write.
  void produce_matrix(const ByteSink& sink) const {
    const size_t rows_in = static_cast<size_t>(shape_[0]), cols_in = static_cast<size_t>(shape_[1]);
    const size_t es = static_cast<size_t>(element_size_);
    const size_t row_bytes = rows_in * es;  // one output row
    const size_t block = std::max<size_t>(1, std::min<size_t>(64, kChunkBytes / std::max<size_t>(row_bytes, 1)));
    std::vector<uint8_t> buffer(block * row_bytes);
    for (size_t r0 = 0; r0 < cols_in; r0 += block) {
      const size_t r1 = std::min(cols_in, r0 + block);
      switch (es) {
        case 1: transpose_block<uint8_t>(r0, r1, rows_in, cols_in, buffer.data()); break;
        case 2: transpose_block<uint16_t>(r0, r1, rows_in, cols_in, buffer.data()); break;
        case 4: transpose_block<uint32_t>(r0, r1, rows_in, cols_in, buffer.data()); break;
        case 8: transpose_block<uint64_t>(r0, r1, rows_in, cols_in, buffer.data()); break;
        default:
          for (size_t c = 0; c < rows_in; ++c) {
            const uint8_t* src = data_ + (c * cols_in + r0) * es;
            for (size_t r = r0; r < r1; ++r, src += es) std::memcpy(&buffer[(r - r0) * row_bytes + c * es], src, es);
          }
      }
      sink(buffer.data(), (r1 - r0) * row_bytes);
    }
  }

  // Output rows [r0, r1) of the transposed matrix into `out`, in tiles of 8 input rows: the
  // tile's reads stay in L1 (8 rows a power-of-two stride apart share one 8-way cache set; 16
  // thrashed it) while each output row gets 8 contiguous elements.
  template <typename T>
  void transpose_block(size_t r0, size_t r1, size_t rows_in, size_t cols_in, uint8_t* out_bytes) const {
    constexpr size_t kTile = 8;
    T* out = reinterpret_cast<T*>(out_bytes);
    for (size_t c0 = 0; c0 < rows_in; c0 += kTile) {
      const size_t c1 = std::min(rows_in, c0 + kTile);
      for (size_t r = r0; r < r1; ++r) {
        T* dst = out + (r - r0) * rows_in;
        for (size_t c = c0; c < c1; ++c) {
          T v;
          std::memcpy(&v, data_ + (c * cols_in + r) * sizeof(T), sizeof(T));  // torch memory may be unaligned
          dst[c] = v;
        }
      }
    }
  }

  // Any permutation: an odometer over the output's indices, copying runs of the last dimension
  // when the permutation keeps it last.
  void produce_general(const ByteSink& sink) const {
    const size_t rank = shape_.size();
    const size_t es = static_cast<size_t>(element_size_);
    std::vector<size_t> in_stride(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) in_stride[d] = in_stride[d + 1] * static_cast<size_t>(shape_[d + 1]);
    std::vector<size_t> out_shape(rank), stride(rank);
    for (size_t d = 0; d < rank; ++d) {
      out_shape[d] = static_cast<size_t>(shape_[perm_[d]]);
      stride[d] = in_stride[perm_[d]];
    }
    const bool runs = rank > 0 && stride[rank - 1] == 1;
    const size_t run = runs ? out_shape[rank - 1] : 1;
    std::vector<size_t> index(rank, 0);
    std::vector<uint8_t> buffer;
    buffer.reserve(kChunkBytes + run * es);
    for (size_t done = 0; done < count_; done += run) {
      size_t offset = 0;
      for (size_t d = 0; d < rank; ++d) offset += index[d] * stride[d];
      const size_t at = buffer.size();
      buffer.resize(at + run * es);
      std::memcpy(&buffer[at], data_ + offset * es, run * es);
      if (buffer.size() >= kChunkBytes) {
        sink(buffer.data(), buffer.size());
        buffer.clear();
      }
      for (size_t d = runs ? rank - 1 : rank; d-- > 0;) {  // advance the odometer
        if (++index[d] < out_shape[d]) break;
        index[d] = 0;
      }
    }
    if (!buffer.empty()) sink(buffer.data(), buffer.size());
  }

  const uint8_t* data_;
  std::shared_ptr<const void> owner_;
  int element_size_;
  std::vector<int64_t> shape_, perm_;
  size_t count_;
};

class Cast final : public TensorBytes {
 public:
  Cast(const void* data, std::shared_ptr<const void> owner, size_t count, ScalarType from, ScalarType to)
      : data_(static_cast<const uint8_t*>(data)), owner_(std::move(owner)), count_(count), from_(from), to_(to) {}

  size_t size() const override { return count_ * static_cast<size_t>(element_size(to_)); }

  void produce(const ByteSink& sink) const override {
    const size_t in_size = static_cast<size_t>(element_size(from_)), out_size = static_cast<size_t>(element_size(to_));
    const size_t per_chunk = std::max<size_t>(1, kChunkBytes / out_size);
    std::vector<uint8_t> buffer(std::min(count_, per_chunk) * out_size);
    for (size_t i0 = 0; i0 < count_; i0 += per_chunk) {
      const size_t n = std::min(per_chunk, count_ - i0);
      for (size_t i = 0; i < n; ++i) convert_element(from_, data_ + (i0 + i) * in_size, to_, &buffer[i * out_size]);
      sink(buffer.data(), n * out_size);
    }
  }

 private:
  const uint8_t* data_;
  std::shared_ptr<const void> owner_;
  size_t count_;
  ScalarType from_, to_;
};

}  // namespace

std::shared_ptr<const TensorBytes> transposed_bytes(const void* data, std::shared_ptr<const void> owner,
                                                    int element_size, std::vector<int64_t> shape,
                                                    std::vector<int64_t> perm) {
  return std::make_shared<Transposed>(data, std::move(owner), element_size, std::move(shape), std::move(perm));
}

std::shared_ptr<const TensorBytes> cast_bytes(const void* data, std::shared_ptr<const void> owner, size_t count,
                                              ScalarType from, ScalarType to) {
  return std::make_shared<Cast>(data, std::move(owner), count, from, to);
}

}  // namespace fastonnx
