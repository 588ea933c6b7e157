// Pages of memory-mapped checkpoints, returned once read: the bounded-memory promise when a
// model's weights are streamed from a checkpoint (export(weights=...)).
//
// A checkpoint's tensors are read where the file is mapped; every page read stays in the
// process's resident memory until it is unmapped or dropped. Dropping (madvise MADV_DONTNEED)
// is safe only for a read-only file mapping, whose pages are read again from the page cache if
// touched again; on any other memory it would zero the bytes. So only ranges registered as such
// a mapping are ever dropped, and a range is unregistered before it can be unmapped.
#pragma once

#include <cstddef>

namespace fastonnx {

// Registers [begin, begin + size) as a read-only file mapping for as long as it lives.
class ReadOnlyMapping {
 public:
  ReadOnlyMapping(const void* begin, size_t size);
  ~ReadOnlyMapping();
  ReadOnlyMapping(const ReadOnlyMapping&) = delete;
  ReadOnlyMapping& operator=(const ReadOnlyMapping&) = delete;

 private:
  const void* begin_;
};

// Drops the pages of [begin, begin + size) that lie in a registered mapping (whole pages
// only); memory outside every mapping is left alone. Safe while other threads read the range.
void drop_read_pages(const void* begin, size_t size);

// Drops every page of every registered mapping (the writer, between pieces).
void drop_all_read_pages();

// Whether any of [begin, begin + size) lies in a registered mapping.
bool in_read_only_mapping(const void* begin, size_t size);

// Asks the kernel to read the pages of [begin, begin + size) that lie in a registered mapping
// into the page cache, without waiting for them (cached_blocks.h).
void will_read_pages(const void* begin, size_t size);

// Waits until the pages of [begin, begin + size) that lie in a registered mapping are in the page
// cache (read if they are not), a step at a time, each step's pages dropped from the process
// again: its resident memory grows by one step at most.
void wait_for_read_pages(const void* begin, size_t size);

}  // namespace fastonnx
