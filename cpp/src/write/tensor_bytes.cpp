#include "fastonnx/tensor_bytes.h"

#include <algorithm>
#include <cstring>

#include "fastonnx/convert_kernels.h"
#include "fastonnx/numeric.h"
#include "fastonnx/read_pages.h"
#include "fastonnx/transpose_kernels.h"

namespace fastonnx {

void TensorBytes::produce(const ByteSink& sink) const {
  const size_t total = size();
  if (total == 0) return;
  const size_t chunk = chunk_bytes(kTensorChunkBytes, kLargestChunkBytes);
  AlignedBytes buffer;
  buffer.reserve(std::min(chunk, total));
  for (size_t at = 0; at < total; at += chunk) {
    const size_t n = std::min(chunk, total - at);
    fill(at, at + n, buffer.data());
    sink(buffer.data(), n);
  }
}

namespace {

// Each range of a transposed matrix reads a strip of every input row, so the matrix is read once
// per range: it is computed in kTransposePasses ranges, of at most the caller's `most` (and at
// least the writer's chunk). Ranges of 1 MB read an 8B LLaMA's 235 MB MLP matrices 235 times
// over, in page faults and TLB misses that cost more CPU than the write itself; a quarter of the
// matrix keeps the ranges in flight (prefetch.h) small beside it. One larger than kLargeTransposeBytes
// also drops the pages of its source (a checkpoint's mapping) as it reads them (read_pages.h):
// the memory held is then a few ranges and a strip of input rows, whatever its size.
constexpr size_t kLargeTransposeBytes = size_t{64} << 20;
constexpr size_t kTransposePasses = 4;
constexpr size_t kDropEveryBytes = size_t{8} << 20;

class Transposed final : public TensorBytes {
 public:
  Transposed(const void* data, std::shared_ptr<const void> owner, int element_size, std::vector<int64_t> shape,
             std::vector<int64_t> perm)
      : data_(static_cast<const uint8_t*>(data)),
        owner_(std::move(owner)),
        es_(static_cast<size_t>(element_size)),
        shape_(std::move(shape)),
        perm_(std::move(perm)) {
    count_ = 1;
    for (int64_t d : shape_) count_ *= static_cast<size_t>(d);
  }

  size_t size() const override { return count_ * es_; }
  std::span<const uint8_t> source() const override { return {data_, size()}; }
  std::optional<Borrowed> borrowed(ScalarType dtype) const override {
    if (shape_.size() != 2 || perm_ != std::vector<int64_t>{1, 0}) return std::nullopt;
    return Borrowed{data_, owner_, dtype, true, {shape_[0], shape_[1]}};
  }

  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const Transposed*>(&other);
    return o != nullptr && o->data_ == data_ && o->es_ == es_ && o->shape_ == shape_ && o->perm_ == perm_;
  }

  size_t chunk_bytes(size_t target, size_t most) const override {
    target = std::max(target, std::min(size() / kTransposePasses, most));
    if (shape_.size() == 2) {
      // Whole output rows, a tile's worth at a time where they fit: a range that starts or ends
      // inside a row is gathered element by element.
      const size_t row = static_cast<size_t>(shape_[0]) * es_;
      if (row > 0 && row <= target) {
        const size_t rows = target / row;
        return (rows >= kTransposeTile ? rows / kTransposeTile * kTransposeTile : rows) * row;
      }
    }
    return std::max(es_, target / es_ * es_);
  }

  void fill(size_t begin, size_t end, uint8_t* out) const override {
    if (begin >= end) return;
    if (shape_.size() == 2) {
      fill_matrix(begin / es_, end / es_, out);
    } else {
      fill_general(begin / es_, end / es_, out);
    }
  }

 private:
  // Output elements [k, e) of the transposed matrix: out[r][c] = in[c][r]. A partial first
  // and last output row element by element, the whole rows between in tiles.
  void fill_matrix(size_t k, size_t e, uint8_t* out) const {
    const size_t rows_in = static_cast<size_t>(shape_[0]);  // the length of an output row
    if (k % rows_in != 0) {
      const size_t r = k / rows_in, c0 = k % rows_in, c1 = std::min(rows_in, c0 + (e - k));
      gather(r, r + 1, c0, c1, out);
      out += (c1 - c0) * es_;
      k += c1 - c0;
    }
    const size_t r0 = k / rows_in, r1 = e / rows_in;
    if (r0 < r1) {
      whole_rows(r0, r1, out);
      out += (r1 - r0) * rows_in * es_;
      k = r1 * rows_in;
    }
    if (k < e) gather(k / rows_in, k / rows_in + 1, 0, e - k, out);
  }

  // Output rows [r0, r1) into `out`, in bands of input rows that fill a cache line of each output
  // row (16 rows of 32-bit elements: the band kernel's loads of 16 rows a power-of-two stride apart
  // share an L1 set and come from L2, which costs less than writing each output line in halves),
  // then strips of kTransposeTile rows, then element by element at the edges.
  void whole_rows(size_t r0, size_t r1, uint8_t* out) const {
    const size_t rows_in = static_cast<size_t>(shape_[0]), cols_in = static_cast<size_t>(shape_[1]);
    const TransposeKernels kernels = transpose_kernels(static_cast<int>(es_));
    const size_t vector_rows = kernels.strip ? (r1 - r0) / kTransposeTile * kTransposeTile : 0;
    const bool drop = size() > kLargeTransposeBytes;
    size_t unreleased = 0;  // input rows [unreleased, c1) are read and not dropped yet
    for (size_t c0 = 0, c1 = 0; c0 < rows_in; c0 = c1) {
      const size_t band = kernels.band && rows_in - c0 >= kernels.band_rows ? kernels.band_rows : kTransposeTile;
      c1 = std::min(rows_in, c0 + band);
      size_t r = r0;
      if (c1 - c0 == band && vector_rows > 0) {
        (band == kTransposeTile ? kernels.strip : kernels.band)(data_ + (c0 * cols_in + r0) * es_, cols_in,
                                                                out + c0 * es_, rows_in, vector_rows);
        r += vector_rows;
      }
      if (r < r1) gather(r, r1, c0, c1, out + ((r - r0) * rows_in + c0) * es_);
      const size_t read = (c1 - unreleased) * cols_in * es_;
      if (drop && (read >= kDropEveryBytes || c1 == rows_in)) {
        drop_read_pages(data_ + unreleased * cols_in * es_, read);
        unreleased = c1;
      }
    }
  }

  // out[r][c] = in[c][r] for r in [r0, r1), c in [c0, c1), where `dst` holds out[r0][c0] and
  // output rows are rows_in elements apart.
  void gather(size_t r0, size_t r1, size_t c0, size_t c1, uint8_t* dst) const {
    switch (es_) {
      case 1:
        gather_typed<uint8_t>(r0, r1, c0, c1, dst);
        break;
      case 2:
        gather_typed<uint16_t>(r0, r1, c0, c1, dst);
        break;
      case 4:
        gather_typed<uint32_t>(r0, r1, c0, c1, dst);
        break;
      case 8:
        gather_typed<uint64_t>(r0, r1, c0, c1, dst);
        break;
      default: {
        const size_t rows_in = static_cast<size_t>(shape_[0]), cols_in = static_cast<size_t>(shape_[1]);
        for (size_t r = r0; r < r1; ++r) {
          uint8_t* row = dst + (r - r0) * rows_in * es_;
          for (size_t c = c0; c < c1; ++c) std::memcpy(row + (c - c0) * es_, data_ + (c * cols_in + r) * es_, es_);
        }
      }
    }
  }

  // Typed: a memcpy call per element of unknown size made a large model's transposed weights
  // cost three times their plain write.
  template <typename T>
  void gather_typed(size_t r0, size_t r1, size_t c0, size_t c1, uint8_t* dst) const {
    const size_t rows_in = static_cast<size_t>(shape_[0]), cols_in = static_cast<size_t>(shape_[1]);
    for (size_t r = r0; r < r1; ++r) {
      uint8_t* row = dst + (r - r0) * rows_in * sizeof(T);
      for (size_t c = c0; c < c1; ++c) {
        const T v = load_unaligned<T>(data_ + (c * cols_in + r) * sizeof(T));
        std::memcpy(row + (c - c0) * sizeof(T), &v, sizeof(T));
      }
    }
  }

  // Any permutation, output elements [k, e): an odometer over the output's indices, copying
  // runs of the last dimension when the permutation keeps it last.
  void fill_general(size_t k, size_t e, uint8_t* out) const {
    const size_t rank = shape_.size();
    if (rank == 0) {
      std::memcpy(out, data_, es_);
      return;
    }
    std::vector<size_t> in_stride(rank, 1);
    for (size_t d = rank - 1; d-- > 0;) in_stride[d] = in_stride[d + 1] * static_cast<size_t>(shape_[d + 1]);
    std::vector<size_t> out_shape(rank), stride(rank), index(rank);
    for (size_t d = 0; d < rank; ++d) {
      out_shape[d] = static_cast<size_t>(shape_[perm_[d]]);
      stride[d] = in_stride[perm_[d]];
    }
    for (size_t d = rank, rest = k; d-- > 0;) {
      index[d] = rest % out_shape[d];
      rest /= out_shape[d];
    }
    const size_t last = rank - 1;
    while (k < e) {
      size_t offset = 0;
      for (size_t d = 0; d < rank; ++d) offset += index[d] * stride[d];
      const size_t n = std::min(out_shape[last] - index[last], e - k);
      if (stride[last] == 1) {
        std::memcpy(out, data_ + offset * es_, n * es_);
      } else {
        for (size_t i = 0; i < n; ++i) std::memcpy(out + i * es_, data_ + (offset + i * stride[last]) * es_, es_);
      }
      out += n * es_;
      k += n;
      index[last] += n;
      for (size_t d = last; d > 0 && index[d] == out_shape[d]; --d) {  // carry
        index[d] = 0;
        ++index[d - 1];
      }
    }
  }

  const uint8_t* data_;
  std::shared_ptr<const void> owner_;
  size_t es_;
  std::vector<int64_t> shape_, perm_;
  size_t count_;
};

// `count` elements of `from` at `in` as `to` at `out`.
void convert_elements(ScalarType from, const uint8_t* in, ScalarType to, uint8_t* out, size_t count) {
  if (is_streamed_float(from) && is_streamed_float(to)) {
    convert_floats(from, in, to, out, count);
    return;
  }
  const size_t is = static_cast<size_t>(element_size(from)), os = static_cast<size_t>(element_size(to));
  for (size_t i = 0; i < count; ++i) convert_element(from, in + i * is, to, out + i * os);
}

class Cast final : public TensorBytes {
 public:
  Cast(const void* data, std::shared_ptr<const void> owner, size_t count, ScalarType from, ScalarType to)
      : data_(static_cast<const uint8_t*>(data)), owner_(std::move(owner)), count_(count), from_(from), to_(to) {}

  size_t size() const override { return count_ * out_size(); }

  size_t chunk_bytes(size_t target, size_t /*most*/) const override {
    return std::max(out_size(), target / out_size() * out_size());
  }

  void fill(size_t begin, size_t end, uint8_t* out) const override {
    const size_t in_size = static_cast<size_t>(element_size(from_)), os = out_size();
    convert_elements(from_, data_ + begin / os * in_size, to_, out, (end - begin) / os);
  }

  std::optional<CastOf> cast_of() const override { return CastOf{data_, owner_, from_}; }
  std::optional<Borrowed> borrowed(ScalarType /*dtype*/) const override {
    return Borrowed{data_, owner_, from_, false, {}};
  }
  std::span<const uint8_t> source() const override {
    return {data_, count_ * static_cast<size_t>(element_size(from_))};
  }

  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const Cast*>(&other);
    return o != nullptr && o->data_ == data_ && o->count_ == count_ && o->from_ == from_ && o->to_ == to_;
  }

 private:
  size_t out_size() const { return static_cast<size_t>(element_size(to_)); }

  const uint8_t* data_;
  std::shared_ptr<const void> owner_;
  size_t count_;
  ScalarType from_, to_;
};

// A computed tensor's elements converted: each range computed from the source's matching range.
class CastComputed final : public TensorBytes {
 public:
  CastComputed(std::shared_ptr<const TensorBytes> source, ScalarType from, ScalarType to)
      : source_(std::move(source)),
        is_(static_cast<size_t>(element_size(from))),
        os_(static_cast<size_t>(element_size(to))),
        from_(from),
        to_(to) {}

  size_t size() const override { return source_->size() / is_ * os_; }
  std::span<const uint8_t> source() const override { return source_->source(); }
  std::optional<Borrowed> borrowed(ScalarType /*dtype*/) const override { return source_->borrowed(from_); }

  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const CastComputed*>(&other);
    return o != nullptr && o->from_ == from_ && o->to_ == to_ && o->source_->same_bytes(*source_);
  }

  size_t chunk_bytes(size_t target, size_t most) const override {
    return std::max(os_, source_->chunk_bytes(std::max(is_, target / os_ * is_), most / os_ * is_) / is_ * os_);
  }

  // Same-size dtypes (bfloat16 and float16) are converted in place; others through a buffer
  // kept by the thread (a range of a large transposed matrix is tens of MB, allocated and zeroed
  // again for every range before).
  void fill(size_t begin, size_t end, uint8_t* out) const override {
    const size_t count = (end - begin) / os_;
    uint8_t* in = out;
    if (is_ != os_) {
      thread_local AlignedBytes buffer;
      buffer.reserve(count * is_);
      in = buffer.data();
    }
    source_->fill(begin / os_ * is_, end / os_ * is_, in);
    convert_elements(from_, in, to_, out, count);
  }

 private:
  std::shared_ptr<const TensorBytes> source_;
  size_t is_, os_;
  ScalarType from_, to_;
};

// The borrowed bytes of a tensor computed from `parts` (Stacked, Columns): all of theirs.
std::vector<std::span<const uint8_t>> sources_of(const std::vector<std::shared_ptr<const TensorBytes>>& parts) {
  std::vector<std::span<const uint8_t>> out;
  for (const auto& p : parts) {
    for (const auto s : p->sources()) out.push_back(s);
  }
  return out;
}

// Whether two tensors computed from parts the same way compute the same bytes: part by part.
bool same_parts(const std::vector<std::shared_ptr<const TensorBytes>>& a,
                const std::vector<std::shared_ptr<const TensorBytes>>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a[i]->same_bytes(*b[i])) return false;
  }
  return true;
}

// Parts one after the other; each range is filled from the parts it spans.
class Stacked final : public TensorBytes {
 public:
  Stacked(std::vector<std::shared_ptr<const TensorBytes>> parts, size_t element_size)
      : parts_(std::move(parts)), es_(element_size) {
    size_t at = 0;
    for (const auto& p : parts_) {
      begins_.push_back(at);
      at += p->size();
    }
    size_ = at;
  }

  size_t size() const override { return size_; }
  bool independent_ranges() const override {
    return std::all_of(parts_.begin(), parts_.end(), [](const auto& p) { return p->independent_ranges(); });
  }
  // The first part's (which keys where the bytes are placed, serializer.cpp); all of them in sources().
  std::span<const uint8_t> source() const override { return parts_.front()->source(); }
  std::vector<std::span<const uint8_t>> sources() const override { return sources_of(parts_); }

  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const Stacked*>(&other);
    return o != nullptr && same_parts(parts_, o->parts_);
  }

  size_t chunk_bytes(size_t target, size_t most) const override {
    size_t chunk = es_;
    for (const auto& p : parts_) chunk = std::max(chunk, p->chunk_bytes(target, most));
    return chunk / es_ * es_;
  }

  void fill(size_t begin, size_t end, uint8_t* out) const override {
    for (size_t i = 0; i < parts_.size() && begin < end; ++i) {
      const size_t p0 = begins_[i], p1 = p0 + parts_[i]->size();
      if (p1 <= begin) continue;
      const size_t to = std::min(end, p1);
      parts_[i]->fill(begin - p0, to - p0, out);
      out += to - begin;
      begin = to;
    }
  }

 private:
  std::vector<std::shared_ptr<const TensorBytes>> parts_;
  std::vector<size_t> begins_;
  size_t es_, size_ = 0;
};

// Bytes the model holds in memory as they are (a weight MatMul reads untransposed).
class Memory final : public TensorBytes {
 public:
  Memory(const void* data, std::shared_ptr<const void> owner, size_t size, size_t element_size)
      : data_(static_cast<const uint8_t*>(data)), owner_(std::move(owner)), size_(size), es_(element_size) {}

  size_t size() const override { return size_; }
  std::span<const uint8_t> source() const override { return {data_, size_}; }
  size_t chunk_bytes(size_t target, size_t /*most*/) const override { return std::max(es_, target / es_ * es_); }
  void fill(size_t begin, size_t end, uint8_t* out) const override { std::memcpy(out, data_ + begin, end - begin); }
  std::optional<Borrowed> borrowed(ScalarType dtype) const override {
    return Borrowed{data_, owner_, dtype, false, {}};
  }

  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const Memory*>(&other);
    return o != nullptr && o->data_ == data_ && o->size_ == size_;
  }

 private:
  const uint8_t* data_;
  std::shared_ptr<const void> owner_;
  size_t size_, es_;
};

// Matrices of one row count side by side. A range of output rows is filled from the same rows
// of every part, each computed into a buffer and scattered into the output rows: a part that is
// a transposed weight is then still computed a band of rows at a time, never element by element.
class Columns final : public TensorBytes {
 public:
  Columns(std::vector<std::shared_ptr<const TensorBytes>> parts, size_t rows) : parts_(std::move(parts)), rows_(rows) {
    for (const auto& p : parts_) {
      part_row_.push_back(p->size() / rows_);
      row_ += part_row_.back();
    }
  }

  size_t size() const override { return rows_ * row_; }
  // The first part's (which keys where the bytes are placed, serializer.cpp); all of them in sources().
  std::span<const uint8_t> source() const override { return parts_.front()->source(); }
  std::vector<std::span<const uint8_t>> sources() const override { return sources_of(parts_); }

  bool same_bytes(const TensorBytes& other) const override {
    const auto* o = dynamic_cast<const Columns*>(&other);
    return o != nullptr && o->rows_ == rows_ && same_parts(parts_, o->parts_);
  }

  // Whole output rows: as many as every part computes efficiently in its share of the range.
  size_t chunk_bytes(size_t target, size_t most) const override {
    size_t rows = rows_;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const size_t pr = part_row_[i];
      const size_t part = parts_[i]->chunk_bytes(std::max(pr, target / row_ * pr), std::max(pr, most / row_ * pr));
      rows = std::min(rows, std::max<size_t>(1, part / pr));
    }
    return rows * row_;
  }

  void fill(size_t begin, size_t end, uint8_t* out) const override {
    if (begin >= end) return;
    const size_t r0 = begin / row_, r1 = (end + row_ - 1) / row_;
    if (begin % row_ == 0 && end % row_ == 0) {
      fill_rows(r0, r1, out);
      return;
    }
    thread_local AlignedBytes rows;  // a range that starts or ends inside a row: its whole rows
    rows.reserve((r1 - r0) * row_);
    fill_rows(r0, r1, rows.data());
    std::memcpy(out, rows.data() + (begin - r0 * row_), end - begin);
  }

 private:
  void fill_rows(size_t r0, size_t r1, uint8_t* out) const {
    thread_local AlignedBytes part;
    size_t column = 0;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const size_t pr = part_row_[i];
      part.reserve((r1 - r0) * pr);
      parts_[i]->fill(r0 * pr, r1 * pr, part.data());
      for (size_t r = 0; r < r1 - r0; ++r) std::memcpy(out + r * row_ + column, part.data() + r * pr, pr);
      column += pr;
    }
  }

  std::vector<std::shared_ptr<const TensorBytes>> parts_;
  std::vector<size_t> part_row_;  // bytes of a row of each part
  size_t rows_, row_ = 0;
};

}  // namespace

std::shared_ptr<const TensorBytes> stacked_bytes(std::vector<std::shared_ptr<const TensorBytes>> parts,
                                                 int element_size) {
  return std::make_shared<Stacked>(std::move(parts), static_cast<size_t>(element_size));
}

std::shared_ptr<const TensorBytes> memory_bytes(const void* data, std::shared_ptr<const void> owner, size_t size,
                                                int element_size) {
  return std::make_shared<Memory>(data, std::move(owner), size, static_cast<size_t>(element_size));
}

std::shared_ptr<const TensorBytes> columns_bytes(std::vector<std::shared_ptr<const TensorBytes>> parts, int64_t rows) {
  return std::make_shared<Columns>(std::move(parts), static_cast<size_t>(rows));
}

std::shared_ptr<const TensorBytes> cast_computed_bytes(std::shared_ptr<const TensorBytes> source, ScalarType from,
                                                       ScalarType to) {
  return std::make_shared<CastComputed>(std::move(source), from, to);
}

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
