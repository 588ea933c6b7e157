// The writer's reading of a memory-mapped checkpoint in blocks (cached_blocks.h): which
// placements each need() reads, and that the pages it read are in the page cache and not
// resident in the process afterwards.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fastonnx/cached_blocks.h"
#include "fastonnx/read_pages.h"

namespace fastonnx {
namespace {

constexpr size_t kPage = 4096;

// A file of `pages` pages mapped read-only, registered as a checkpoint's mapping is.
class MappedFile {
 public:
  explicit MappedFile(size_t pages) : size_(pages * kPage) {
    char name[] = "/tmp/fastonnx_cached_blocks_XXXXXX";
    fd_ = ::mkstemp(name);
    path_ = name;
    std::vector<char> bytes(size_, 'x');
    EXPECT_EQ(::write(fd_, bytes.data(), size_), static_cast<ssize_t>(size_));
    // Written back and evicted, so that what need() reads is read from the disk.
    EXPECT_EQ(::fsync(fd_), 0);
    EXPECT_EQ(::posix_fadvise(fd_, 0, static_cast<off_t>(size_), POSIX_FADV_DONTNEED), 0);
    data_ = static_cast<const uint8_t*>(::mmap(nullptr, size_, PROT_READ, MAP_SHARED, fd_, 0));
    registration_ = std::make_unique<ReadOnlyMapping>(data_, size_);
  }
  ~MappedFile() {
    registration_.reset();
    ::munmap(const_cast<uint8_t*>(data_), size_);
    ::close(fd_);
    ::unlink(path_.c_str());
  }
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

TEST(CachedBlocks, ReadsWholePlacementsABlockAtATime) {
  MappedFile file(64);
  const uint8_t* d = file.data();
  // Placements of 4, 4, 8, 16 and 32 pages; blocks of at least 10 pages.
  CachedBlocks blocks({{d, 4 * kPage},
                       {d + 4 * kPage, 4 * kPage},
                       {d + 8 * kPage, 8 * kPage},
                       {d + 16 * kPage, 16 * kPage},
                       {d + 32 * kPage, 32 * kPage}},
                      10 * kPage);
  EXPECT_EQ(blocks.read(), 0U);
  EXPECT_LT(file.cached(0, 64 * kPage), 64U);
  blocks.need(0);
  EXPECT_EQ(blocks.read(), 3U);  // 4 + 4 + 8 pages: the first that reach 10
  EXPECT_EQ(file.cached(0, 16 * kPage), 16U);
  blocks.need(1);
  blocks.need(2);
  EXPECT_EQ(blocks.read(), 3U);  // read already
  blocks.need(4);
  EXPECT_EQ(blocks.read(), 5U);  // up to the one asked for, whatever the block size
  EXPECT_EQ(file.cached(0, 64 * kPage), 64U);
  // Each step dropped from the process once read; the kernel's fault-around may have mapped up to
  // 64 KB past the last one.
  EXPECT_LE(file.resident(), 16 * kPage);
}

TEST(CachedBlocks, LeavesMemoryOutsideMappingsAlone) {
  std::vector<uint8_t> heap(8 * kPage, 7);
  CachedBlocks blocks({{heap.data(), heap.size()}}, kPage);
  blocks.need(0);
  EXPECT_EQ(blocks.read(), 0U);  // nothing to read: not a registered mapping
  EXPECT_EQ(heap[kPage], 7);     // and never dropped (it would read as zeros)
}

}  // namespace
}  // namespace fastonnx
