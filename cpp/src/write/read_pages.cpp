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

void drop_read_pages(const void* begin, size_t size) {
  const auto b = reinterpret_cast<uintptr_t>(begin), e = b + size;
  // Held while dropping: a mapping is not unregistered (then unmapped) in the middle.
  const std::lock_guard<std::mutex> lock(mutex());
  for (const Range& r : ranges()) {
    if (b < r.end && r.begin < e) drop(std::max(b, r.begin), std::min(e, r.end));
  }
}

void drop_all_read_pages() {
  const std::lock_guard<std::mutex> lock(mutex());
  for (const Range& r : ranges()) drop(r.begin, r.end);
}

}  // namespace fastonnx
