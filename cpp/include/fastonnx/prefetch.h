// Computed weights (transposed or cast while written, see tensor_bytes.h) computed on helper
// threads ahead of the writer. On a transformer most of the file is transposed Linear weights;
// computed in line, the transposition and the write add up, while on two cores one overlaps
// the other and the file costs about what its plain bytes cost to write. Quantizing is more
// work per byte than the write, and its ranges are independent (TensorBytes::
// independent_ranges): one helper per core computes them, the writer taking them in order.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include "fastonnx/tensor_bytes.h"
#include "fastonnx/transpose_kernels.h"

namespace fastonnx {

class Prefetcher {
 public:
  // `order`: the computed tensors in the order the writer will ask for them (a tensor may come
  // more than once). With a single core, or nothing to compute, no thread is started and each
  // tensor is computed when asked for.
  explicit Prefetcher(std::vector<const TensorBytes*> order);
  // Stops the helpers, also in the middle of a tensor (the writer failed or was interrupted).
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Calls `sink` with the bytes of `bytes`, which must be the next tensor of the order. An
  // exception of a helper's (out of memory) is rethrown here.
  void produce(const TensorBytes& bytes, const ByteSink& sink);

 private:
  struct Chunk {
    size_t slot;
    size_t size;
    bool last;  // of its tensor
    bool done;  // computed
  };
  struct Task {
    const TensorBytes* tensor;
    size_t at, size, sequence;
    bool independent;
  };
  void run();  // each helper thread
  // Whether a helper may take the next chunk now (under mutex_).
  bool may_take() const;
  Task take();  // the next chunk, its slot reserved (under mutex_)

  std::vector<const TensorBytes*> order_;
  size_t next_ = 0;  // the writer's position in order_

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<AlignedBytes> slots_;   // aligned: the transposes stream to them
  size_t most_ = kLargestChunkBytes;  // the largest range a slot takes (prefetch.cpp)
  std::vector<size_t> free_;          // slots a helper may fill
  // The chunks the helpers took and the writer has not consumed, in the order of the tensors:
  // the front is chunk `consumed_`. Chunks are taken in that order, each with its slot, so the
  // one the writer waits for always has one.
  std::deque<Chunk> chunks_;
  size_t consumed_ = 0;
  size_t tensor_ = 0, at_ = 0, chunk_ = 0;  // where the next chunk to take starts, and its tensor's chunk size
  size_t computing_ = 0;                    // chunks being computed
  bool computing_serial_ = false;           // one of them is of a tensor computed a chunk at a time
  bool stop_ = false;
  std::exception_ptr error_;
  std::vector<std::thread> helpers_;
};

// The bytes of `bytes` to `sink`: from `ahead` when the writer has one, else computed here.
inline void produce_computed(const TensorBytes& bytes, const ByteSink& sink, Prefetcher* ahead) {
  if (ahead != nullptr) {
    ahead->produce(bytes, sink);
  } else {
    bytes.produce(sink);
  }
}

}  // namespace fastonnx
