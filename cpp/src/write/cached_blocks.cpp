#include "fastonnx/cached_blocks.h"

#include <algorithm>
#include <fstream>
#include <string>

#include "fastonnx/read_pages.h"

namespace fastonnx {
namespace {

// MemAvailable of /proc/meminfo, in bytes; 0 where there is none.
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

}  // namespace

CachedBlocks::CachedBlocks(std::vector<std::span<const uint8_t>> order, size_t block_bytes)
    : order_(std::move(order)), block_bytes_(block_bytes) {
  for (const auto& span : order_) mapped_ = mapped_ || in_read_only_mapping(span.data(), span.size());
}

size_t ReadWhileTracing::default_budget() { return available_memory() / 4; }

ReadWhileTracing::ReadWhileTracing(std::vector<std::span<const uint8_t>> order, size_t budget) : blocks_(order) {
  thread_ = std::thread([this, order = std::move(order), budget] {
    size_t bytes = 0;
    for (size_t i = 0; i < order.size() && bytes < budget && !stop_; ++i) {
      blocks_.need(i);
      bytes += order[i].size();
    }
  });
}

ReadWhileTracing::~ReadWhileTracing() { stop(); }

void ReadWhileTracing::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

size_t CachedBlocks::default_block_bytes() {
  constexpr size_t kMin = size_t{64} << 20, kMax = size_t{1} << 30;
  return std::clamp(available_memory() / 16, kMin, kMax);
}

void CachedBlocks::need(size_t i) {
  if (!mapped_ || i >= order_.size()) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  if (i < read_) return;
  size_t end = i + 1, bytes = 0;
  for (size_t k = read_; k < end; ++k) bytes += order_[k].size();
  for (; end < order_.size() && bytes < block_bytes_; ++end) bytes += order_[end].size();
  // All of the block asked for before waiting for any of it: one stream of reads.
  for (size_t k = read_; k < end; ++k) will_read_pages(order_[k].data(), order_[k].size());
  for (size_t k = read_; k < end; ++k) wait_for_read_pages(order_[k].data(), order_[k].size());
  read_ = end;
}

size_t CachedBlocks::read() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return read_;
}

}  // namespace fastonnx
