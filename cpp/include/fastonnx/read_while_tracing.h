// A checkpoint's first weights read while the model is still being traced (export(weights=...)
// in copy mode): tracing an 8B LLaMA takes seconds, during which the disk and one of two cores
// are otherwise idle, and the writer then finds those weights in the page cache.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <span>
#include <thread>
#include <vector>

namespace fastonnx {

class ReadWhileTracing {
 public:
  // `order`: the weights' bytes in the order the writer will most likely read them (the model's
  // state dict; a wrong guess costs only reads the writer does again). Only bytes in a
  // registered read-only mapping (read_pages.h) are read, on a thread of its own, until `budget`
  // bytes are read or stop().
  explicit ReadWhileTracing(std::vector<std::span<const uint8_t>> order, size_t budget = default_budget());
  ~ReadWhileTracing();
  ReadWhileTracing(const ReadWhileTracing&) = delete;
  ReadWhileTracing& operator=(const ReadWhileTracing&) = delete;

  // Returns once the thread has stopped (within a step of reading): before the writer starts,
  // whose reads it would otherwise compete with.
  void stop();
  // Bytes read so far.
  size_t read() const { return read_; }

  // A quarter of the memory available: the page cache must still hold what was read when the
  // writer comes to it.
  static size_t default_budget();

 private:
  void run(size_t budget);

  std::vector<std::span<const uint8_t>> order_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> read_{0};
  std::thread thread_;
};

}  // namespace fastonnx
