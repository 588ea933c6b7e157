#include "fastonnx/read_pages.h"

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

namespace fastonnx {
namespace {

struct Range {
  uintptr_t begin, end;
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

// wait_for_read_pages's step: the resident memory it may add, and the reads it waits for at once.
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

// Maps the pages of [begin, end), reading those not in the page cache, and waits for them.
void populate(uintptr_t begin, uintptr_t end) {
  const uintptr_t page = page_size();
  begin = begin / page * page;
  if (begin >= end) return;
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the address of a registered mapping
  if (::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_POPULATE_READ) == 0) return;
  // A kernel before 5.14: a read of each page faults it in.
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
    if (b < r.end && r.begin < e) f(std::max(b, r.begin), std::min(e, r.end));
  }
}

}  // namespace

ReadOnlyMapping::ReadOnlyMapping(const void* begin, size_t size) : begin_(begin) {
  const auto b = reinterpret_cast<uintptr_t>(begin);
  const std::lock_guard<std::mutex> lock(mutex());
  ranges().push_back({b, b + size});
}

ReadOnlyMapping::~ReadOnlyMapping() {
  const auto b = reinterpret_cast<uintptr_t>(begin_);
  const std::lock_guard<std::mutex> lock(mutex());
  auto& r = ranges();
  r.erase(std::find_if(r.begin(), r.end(), [&](const Range& x) { return x.begin == b; }));
}

void drop_read_pages(const void* begin, size_t size) { for_mapped_parts(begin, size, drop); }

bool in_read_only_mapping(const void* begin, size_t size) {
  bool found = false;
  for_mapped_parts(begin, size, [&](uintptr_t, uintptr_t) { found = true; });
  return found;
}

void will_read_pages(const void* begin, size_t size) {
  // Advised outside the lock, which the readers' drops take: the call can wait for the disk's
  // queue. Unlike a drop, it is harmless on memory that was unmapped and reused meanwhile.
  std::vector<Range> parts;
  for_mapped_parts(begin, size, [&](uintptr_t b, uintptr_t e) { parts.push_back({b, e}); });
  for (const Range& part : parts) will_need(part.begin, part.end);
}

void wait_for_read_pages(const void* begin, size_t size) {
  const auto b = reinterpret_cast<uintptr_t>(begin), e = b + size;
  for (uintptr_t at = b; at < e; at += kWaitStepBytes) {
    // Step by step with the registry locked, as a drop is: a step is dropped after it is read.
    const void* step = reinterpret_cast<const void*>(at);  // NOLINT(performance-no-int-to-ptr): in [begin, end)
    for_mapped_parts(step, std::min(kWaitStepBytes, e - at), [](uintptr_t pb, uintptr_t pe) {
      populate(pb, pe);
      drop(pb, pe);
    });
  }
}

void drop_all_read_pages() {
  const std::lock_guard<std::mutex> lock(mutex());
  for (const Range& r : ranges()) drop(r.begin, r.end);
}

}  // namespace fastonnx
