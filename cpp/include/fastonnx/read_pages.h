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

// Registers [begin, begin + size) as a read-only mapping of a whole file for as long as it lives;
// `fd`, when given (the caller keeps it open meanwhile), lets release_read_pages evict its pages.
class ReadOnlyMapping {
 public:
  ReadOnlyMapping(const void* begin, size_t size, int fd = -1);
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

// Drops the pages of [begin, begin + size) that lie in a registered mapping from the process and
// evicts them from the page cache (whole pages only; a mapping registered without its file is
// only dropped): bytes the writer has written and will not read again, of a checkpoint too large
// for the page cache to keep (see write_external_data). It is then read through a page cache
// that recycles its pages instead of filling the machine's memory and evicting everything else; on the development
// machine's virtual machine, where memory the guest has not used for a while is handed back to the host and costs a
// hypervisor fault per page when used again, streaming 30 GB of transposed weights took 24-26 s
// this way against 43-57 s without (measured in turn, the checkpoint evicted before each run).
void release_read_pages(const void* begin, size_t size);

// MemAvailable of /proc/meminfo, in bytes (0 where there is none): what the page cache can hold.
size_t available_memory();

// Whether any of [begin, begin + size) lies in a registered mapping.
bool in_read_only_mapping(const void* begin, size_t size);

// Asks the kernel to read the pages of [begin, begin + size) that lie in a registered mapping
// into the page cache, without waiting for them (read_while_tracing.h).
void will_read_pages(const void* begin, size_t size);

// Reads the pages of [begin, begin + size) that lie in a registered mapping into the page cache,
// waits for them and touches each once: on a virtual machine the first access to a page the disk
// wrote into costs the hypervisor's mapping of it (an 8B LLaMA's matrices, transposed straight
// after the disk read them, went at 1.5-1.8 GB/s, and at 8 GB/s once touched). A step at a time,
// each dropped from the process again: its resident memory grows by one step at most.
void read_into_cache(const void* begin, size_t size);

}  // namespace fastonnx
