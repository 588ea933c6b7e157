#include "fastonnx/prefetch.h"

#include <algorithm>
#include <stdexcept>

namespace fastonnx {
namespace {

// Chunks in flight: enough that the helper rarely waits for the writer.
constexpr size_t kSlots = 4;
// The slots together hold at most 1/kWorkShare of the bytes computed (and kSlots ranges of
// kLargestChunkBytes): a transposed matrix is computed in ranges of up to a quarter of it, so a
// 131 MB lm_head alone filled 131 MB of slots, 17 % of a 2-layer LLaMA's weights, where the
// memory an export adds to torch.export's is to stay under 10 % of them.
constexpr size_t kWorkShare = 16;

}  // namespace

Prefetcher::Prefetcher(std::vector<const TensorBytes*> order) : order_(std::move(order)) {
  size_t work = 0;
  for (const TensorBytes* t : order_) work += t->size();
  if (work == 0 || std::thread::hardware_concurrency() < 2) return;
  most_ = std::clamp(work / kWorkShare / kSlots, kTensorChunkBytes, kLargestChunkBytes);
  slots_.resize(kSlots);
  for (size_t i = 0; i < kSlots; ++i) free_.push_back(i);
  helper_ = std::thread([this] { run(); });
}

Prefetcher::~Prefetcher() {
  if (!helper_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  helper_.join();
}

void Prefetcher::run() {
  try {
    for (const TensorBytes* t : order_) {
      const size_t total = t->size();
      const size_t chunk = t->chunk_bytes(kTensorChunkBytes, most_);
      for (size_t at = 0; at < total; at += chunk) {
        const size_t n = std::min(chunk, total - at);
        size_t slot;
        {
          std::unique_lock<std::mutex> lock(mutex_);
          changed_.wait(lock, [&] { return stop_ || !free_.empty(); });
          if (stop_) return;
          slot = free_.back();
          free_.pop_back();
        }
        // The slot is this thread's until it is handed over as ready.
        AlignedBytes& buffer = slots_[slot];
        buffer.reserve(n);
        t->fill(at, at + n, buffer.data());
        {
          std::lock_guard<std::mutex> lock(mutex_);
          ready_.push_back(Chunk{slot, n, at + n == total});
        }
        changed_.notify_all();
      }
    }
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      error_ = std::current_exception();
    }
    changed_.notify_all();
  }
}

void Prefetcher::produce(const TensorBytes& bytes, const ByteSink& sink) {
  if (next_ >= order_.size() || order_[next_] != &bytes) {
    throw std::logic_error("a computed tensor was asked for out of the prefetched order");
  }
  ++next_;
  if (!helper_.joinable()) {
    bytes.produce(sink);
    return;
  }
  for (bool last = bytes.size() == 0; !last;) {
    Chunk chunk;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] { return !ready_.empty() || error_; });
      if (ready_.empty()) std::rethrow_exception(error_);
      chunk = ready_.front();
      ready_.pop_front();
    }
    sink(slots_[chunk.slot].data(), chunk.size);  // may throw: the destructor then stops the helper
    {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(chunk.slot);
    }
    changed_.notify_all();
    last = chunk.last;
  }
}

}  // namespace fastonnx
