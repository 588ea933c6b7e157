// Computed weights (transposed or cast while written, see tensor_bytes.h) computed on a helper
// thread ahead of the writer. On a transformer most of the file is transposed Linear weights;
// computed in line, the transposition and the write add up, while on two cores one overlaps
// the other and the file costs about what its plain bytes cost to write.
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
  // Stops the helper, also in the middle of a tensor (the writer failed or was interrupted).
  ~Prefetcher();
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  // Calls `sink` with the bytes of `bytes`, which must be the next tensor of the order. An
  // exception of the helper's (out of memory) is rethrown here.
  void produce(const TensorBytes& bytes, const ByteSink& sink);

 private:
  struct Chunk {
    size_t slot;
    size_t size;
    bool last;  // of its tensor
  };
  void run();  // the helper thread

  std::vector<const TensorBytes*> order_;
  size_t next_ = 0;  // the writer's position in order_

  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<AlignedBytes> slots_;   // aligned: the transposes stream to them
  size_t most_ = kLargestChunkBytes;  // the largest range a slot takes (prefetch.cpp)
  std::vector<size_t> free_;          // slots the helper may fill
  std::deque<Chunk> ready_;           // filled chunks, oldest first
  bool stop_ = false;
  std::exception_ptr error_;
  std::thread helper_;
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
