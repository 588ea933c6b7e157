#include "fastonnx/read_pages.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace fastonnx {
namespace {

struct Range {
  uintptr_t begin, end;
  int fd;  // the mapped file, or -1
};

// Process-wide: the mappings are the weight sources' (Python objects), the readers anywhere in
// the writer; a handful of entries, looked up once per megabytes read.
std::mutex& mutex() {
  static std::mutex m;
  return m;
}

std::vector<Range>& ranges() {
  static std::vector<Range> r;
  return r;
}

// read_into_cache's step: the resident memory it may add, and the reads it waits for at once.
constexpr uintptr_t kWaitStepBytes = uintptr_t{8} << 20;

uintptr_t page_size() {
  static const auto size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

void drop(uintptr_t begin, uintptr_t end) {
  const uintptr_t page = page_size();
  begin = (begin + page - 1) / page * page;
  end = end / page * page;
  // An error (an unsupported kernel) only keeps the pages resident.
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the address of a registered mapping
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

// Pages partly in the range are read too: the mapping is whole pages of the file.
void will_need(uintptr_t begin, uintptr_t end) {
  const uintptr_t page = page_size();
  begin = begin / page * page;
  // An error only leaves the pages to be read when touched.
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the address of a registered mapping
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_WILLNEED);
}

// Maps the pages of [begin, end), reading those not in the page cache, waits for them and reads
// a byte of each (read_into_cache).
void populate(uintptr_t begin, uintptr_t end) {
  const uintptr_t page = page_size();
  begin = begin / page * page;
  if (begin >= end) return;
  // Mapped at once where the kernel can (5.14 and later), faulted in by the reads below elsewhere.
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the address of a registered mapping
  ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ);
  for (uintptr_t p = begin; p < end; p += page) {
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the address of a registered mapping
    static_cast<void>(*reinterpret_cast<const volatile uint8_t*>(p));
  }
}

// Calls `f(begin, end)` for each part of [begin, begin + size) in a registered mapping, with the
// registry locked: a mapping is not unregistered (then unmapped) in the middle.
template <typename F>
void for_mapped_parts(const void* begin, size_t size, F f) {
  const auto b = reinterpret_cast<uintptr_t>(begin), e = b + size;
  const std::lock_guard<std::mutex> lock(mutex());
  for (const Range& r : ranges()) {
    if (b < r.end && r.begin < e) f(std::max(b, r.begin), std::min(e, r.end), r);
  }
}

}  // namespace

ReadOnlyMapping::ReadOnlyMapping(const void* begin, size_t size, int fd) : begin_(begin) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  const std::lock_guard<std::mutex> lock(mutex());
  ranges().push_back({b, b + size, fd});
}

ReadOnlyMapping::~ReadOnlyMapping() {
  const auto b = reinterpret_cast<uintptr_t>(begin_);
  const std::lock_guard<std::mutex> lock(mutex());
  auto& r = ranges();
  r.erase(std::find_if(r.begin(), r.end(), [&](const Range& x) { return x.begin == b; }));
}

void drop_read_pages(const void* begin, size_t size) {
  for_mapped_parts(begin, size, [](uintptr_t b, uintptr_t e, const Range&) { drop(b, e); });
}

void release_read_pages(const void* begin, size_t size) {
  for_mapped_parts(begin, size, [](uintptr_t b, uintptr_t e, const Range& r) {
    drop(b, e);  // a page mapped in the process is not evicted
    // Whole pages of the file: posix_fadvise keeps those the range covers in part.
    if (r.fd >= 0)
      ::posix_fadvise(r.fd, static_cast<off_t>(b - r.begin), static_cast<off_t>(e - b), POSIX_FADV_DONTNEED);
  });
}

bool in_read_only_mapping(const void* begin, size_t size) {
  bool found = false;
  for_mapped_parts(begin, size, [&](uintptr_t, uintptr_t, const Range&) { found = true; });
  return found;
}

void will_read_pages(const void* begin, size_t size) {
  // Advised outside the lock, which the readers' drops take: the call can wait for the disk's
  // queue. Unlike a drop, it is harmless on memory that was unmapped and reused meanwhile.
  std::vector<Range> parts;
  for_mapped_parts(begin, size, [&](uintptr_t b, uintptr_t e, const Range&) { parts.push_back({b, e, -1}); });
  for (const Range& part : parts) will_need(part.begin, part.end);
}

void read_into_cache(const void* begin, size_t size) {
  const auto b = reinterpret_cast<uintptr_t>(begin), e = b + size;
  for (uintptr_t at = b; at < e; at += kWaitStepBytes) {
    // Step by step with the registry locked, as a drop is: a step is dropped after it is read.
    const void* step = reinterpret_cast<const void*>(at);  // NOLINT(performance-no-int-to-ptr): in [begin, end)
    for_mapped_parts(step, std::min(kWaitStepBytes, e - at), [](uintptr_t pb, uintptr_t pe, const Range&) {
      populate(pb, pe);
      drop(pb, pe);
    });
  }
}

size_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:") return kib << 10;
    meminfo.ignore(64, '\n');
  }
  return 0;
}

void drop_all_read_pages() {
  const std::lock_guard<std::mutex> lock(mutex());
  for (const Range& r : ranges()) drop(r.begin, r.end);
}

}  // namespace fastonnx
