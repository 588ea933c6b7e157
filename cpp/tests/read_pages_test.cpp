// A memory-mapped checkpoint's pages (read_pages.h): read while the model is traced
// (read_while_tracing.h) into the page cache and not into the process's resident memory, up to a
// budget; released once written, evicted from the page cache.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fastonnx/read_pages.h"
#include "fastonnx/read_while_tracing.h"

namespace fastonnx {
namespace {

constexpr size_t kPage = 4096;

// A file of `pages` pages, written back and evicted from the page cache, mapped read-only and
// registered as a checkpoint's mapping is.
class MappedFile {
 public:
  explicit MappedFile(size_t pages) : size_(pages * kPage) {
    char name[] = "/tmp/fastonnx_read_while_tracing_XXXXXX";
    fd_ = ::mkstemp(name);
    path_ = name;
    std::vector<char> bytes(size_, 'x');
    EXPECT_EQ(::write(fd_, bytes.data(), size_), static_cast<ssize_t>(size_));
    EXPECT_EQ(::fsync(fd_), 0);
    EXPECT_EQ(::posix_fadvise(fd_, 0, static_cast<off_t>(size_), POSIX_FADV_DONTNEED), 0);
    data_ = static_cast<const uint8_t*>(::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0));
    registration_ = std::make_unique<ReadOnlyMapping>(data_, size_, fd_);
  }
  ~MappedFile() {
    registration_.reset();
    ::munmap(const_cast<uint8_t*>(data_), size_);
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const uint8_t* data() const { return data_; }

  // Pages of [begin, begin + n) in the page cache (mincore).
  size_t cached(size_t begin, size_t n) const {
    std::vector<unsigned char> in_cache(n / kPage);
    EXPECT_EQ(::mincore(const_cast<uint8_t*>(data_ + begin), n, in_cache.data()), 0);
    size_t pages = 0;
    for (unsigned char c : in_cache) pages += c & 1;
    return pages;
  }

  // Bytes of the mapping resident in the process (its Rss in /proc/self/smaps).
  size_t resident() const {
    std::ifstream smaps("/proc/self/smaps");
    const auto start = reinterpret_cast<uintptr_t>(data_);
    bool in_ours = false;
    for (std::string line; std::getline(smaps, line);) {
      char* end = nullptr;
      const uintptr_t begin = std::strtoull(line.c_str(), &end, 16);
      if (end != line.c_str() && *end == '-') {  // a mapping's first line: "begin-end perms ..."
        in_ours = begin == start;
      } else if (in_ours && line.rfind("Rss:", 0) == 0) {
        return std::strtoull(line.c_str() + 4, nullptr, 10) * 1024;
      }
    }
    return 0;
  }

 private:
  size_t size_;
  int fd_ = -1;
  std::string path_;
  const uint8_t* data_ = nullptr;
  std::unique_ptr<ReadOnlyMapping> registration_;
};

size_t read_all(ReadWhileTracing& reading, size_t bytes) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (reading.read() < bytes && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  reading.stop();
  return reading.read();
}

TEST(ReadWhileTracing, ReadsIntoThePageCacheNotTheProcess) {
  MappedFile file(64);
  const uint8_t* d = file.data();
  EXPECT_LT(file.cached(0, 64 * kPage), 64U);
  ReadWhileTracing reading({{d + 32 * kPage, 32 * kPage}, {d, 16 * kPage}});
  EXPECT_EQ(read_all(reading, 48 * kPage), 48 * kPage);
  EXPECT_EQ(file.cached(0, 16 * kPage), 16U);
  EXPECT_EQ(file.cached(32 * kPage, 32 * kPage), 32U);
  // Each step dropped from the process once read; the kernel's fault-around may have mapped up to
  // 64 KB past the last one.
  EXPECT_LE(file.resident(), 16 * kPage);
}

TEST(ReadWhileTracing, StopsAtItsBudget) {
  MappedFile file(32);
  ReadWhileTracing reading({{file.data(), 32 * kPage}}, 1);
  EXPECT_EQ(read_all(reading, 32 * kPage), 32 * kPage);  // one step (the whole span) at least
  ReadWhileTracing none({{file.data(), 32 * kPage}}, 0);
  EXPECT_EQ(none.read(), 0U);
}

TEST(ReadPages, ReleasedPagesLeaveTheProcessAndThePageCache) {
  MappedFile file(64);
  ReadWhileTracing reading({{file.data(), 64 * kPage}});
  read_all(reading, 64 * kPage);
  EXPECT_EQ(file.cached(0, 64 * kPage), 64U);
  volatile uint8_t sum = 0;
  for (size_t p = 0; p < 64; ++p) sum += file.data()[p * kPage];  // mapped in the process
  // Whole pages only: the first and the last page are shared with bytes not released.
  release_read_pages(file.data() + 100, 32 * kPage);
  EXPECT_EQ(file.cached(0, kPage), 1U);
  EXPECT_EQ(file.cached(kPage, 31 * kPage), 0U);
  EXPECT_EQ(file.cached(32 * kPage, 32 * kPage), 32U);
  EXPECT_EQ(file.data()[5 * kPage], 'x');  // read again from the file
}

TEST(ReadWhileTracing, LeavesMemoryOutsideMappingsAlone) {
  std::vector<uint8_t> heap(8 * kPage, 7);
  ReadWhileTracing reading({{heap.data(), heap.size()}});
  reading.stop();
  EXPECT_EQ(reading.read(), 0U);  // no thread: not a registered mapping
  EXPECT_EQ(heap[kPage], 7);      // and never dropped (it would read as zeros)
}

}  // namespace
}  // namespace fastonnx
