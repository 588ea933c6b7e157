// A checkpoint's bytes brought into the page cache a block at a time, before the writer streams
// them (export(weights=...) in copy mode).
//
// Read as the writer goes (page faults on the memory-mapped checkpoint, a few MB at a time while
// the model's file is written), a checkpoint larger than the page cache streamed at two thirds
// of `cp`'s speed: the disk alternated between small reads and writes. Measured on the
// development machine's virtual disk, 8 GB of shards copied through a mapping: reads interleaved
// with the writes took 12-16 s, `cp` (one file read, then written back) 12-17 s, a block of 1 GB
// read whole and then written 9-11 s. So the writer asks for each block whole (one stream of
// reads the disk serves at its full speed), waits for it, and then writes it; the pages stay in
// the page cache, not in the process's memory.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

namespace fastonnx {

class CachedBlocks {
 public:
  // `order`: the bytes each placement of the file reads, in the order they are written. Only
  // bytes in a registered read-only mapping (read_pages.h) are read ahead. Blocks are whole
  // placements, `block_bytes` or more at a time.
  explicit CachedBlocks(std::vector<std::span<const uint8_t>> order, size_t block_bytes = default_block_bytes());

  // Returns once order[i] is in the page cache: the block that holds it read first, if it is not
  // yet, with the placements after it up to the block's size. Thread-safe: the writer and the
  // prefetcher both ask (prefetch.h), and a second caller waits for the block the first reads.
  void need(size_t i);

  // The placements read so far: [0, read()).
  size_t read() const;

  // A 16th of the memory available (page cache that does not hold the blocks being written is
  // read again), at least 64 MB and at most 1 GB (1 GB measured best of 256 MB to 1 GB; a larger
  // one only delays the first write).
  static size_t default_block_bytes();

 private:
  std::vector<std::span<const uint8_t>> order_;
  size_t block_bytes_;
  bool mapped_ = false;  // some of order_ lies in a registered mapping
  mutable std::mutex mutex_;
  size_t read_ = 0;
};

// The first blocks of a checkpoint read while the model is still being traced, when the disk is
// otherwise idle (export(weights=...): tracing an 8B LLaMA takes seconds, a fifth of the time
// copying its checkpoint takes). `order` is the order the writer will most likely read the
// weights in (the model's state dict); a guess that turns out wrong costs only reads the writer
// does again. A thread of its own reads blocks of it until `budget` bytes are read or it is
// stopped: before the writer starts, whose reads it would otherwise interleave with its own.
class ReadWhileTracing {
 public:
  explicit ReadWhileTracing(std::vector<std::span<const uint8_t>> order, size_t budget = default_budget());
  ~ReadWhileTracing();
  ReadWhileTracing(const ReadWhileTracing&) = delete;
  ReadWhileTracing& operator=(const ReadWhileTracing&) = delete;

  // Returns once the thread has stopped (after the block it is reading).
  void stop();
  size_t read_placements() const { return blocks_.read(); }

  // A quarter of the memory available: the page cache must still hold what was read when the
  // writer comes to it.
  static size_t default_budget();

 private:
  CachedBlocks blocks_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// `blocks->need(i)` when there are blocks.
inline void need(CachedBlocks* blocks, size_t i) {
  if (blocks != nullptr) blocks->need(i);
}

}  // namespace fastonnx
