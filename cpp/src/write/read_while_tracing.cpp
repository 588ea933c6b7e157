#include "fastonnx/read_while_tracing.h"

#include <algorithm>

#include "fastonnx/read_pages.h"

namespace fastonnx {
namespace {

// How far ahead of the step being read the disk is asked to read: a stream of requests it serves
// at its full speed, small beside the budget. A step is what stop() may wait for.
constexpr size_t kAskAheadBytes = size_t{256} << 20;
constexpr size_t kStepBytes = size_t{64} << 20;

}  // namespace

size_t ReadWhileTracing::default_budget() { return available_memory() / 4; }

ReadWhileTracing::ReadWhileTracing(std::vector<std::span<const uint8_t>> order, size_t budget)
    : order_(std::move(order)) {
  const bool mapped = std::any_of(order_.begin(), order_.end(),
                                  [](const auto& span) { return in_read_only_mapping(span.data(), span.size()); });
  if (mapped && budget > 0) thread_ = std::thread([this, budget] { run(budget); });
}

ReadWhileTracing::~ReadWhileTracing() { stop(); }

void ReadWhileTracing::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void ReadWhileTracing::run(size_t budget) {
  for (const auto& span : order_) {
    size_t asked = 0;  // of this span, what the disk was asked for
    for (size_t at = 0; at < span.size(); at += kStepBytes) {
      if (read_ >= budget || stop_) return;
      const size_t n = std::min(kStepBytes, span.size() - at), ahead = std::min(span.size(), at + kAskAheadBytes);
      if (asked < ahead) {
        will_read_pages(span.data() + asked, ahead - asked);
        asked = ahead;
      }
      read_into_cache(span.data() + at, n);
      read_ += n;
    }
  }
}

}  // namespace fastonnx
