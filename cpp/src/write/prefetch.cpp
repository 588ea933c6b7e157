#include "fastonnx/prefetch.h"

#include <algorithm>
#include <stdexcept>

namespace fastonnx {
namespace {

// Helpers at most: one per core quantizes at the disk's speed on the machines measured, and each
// holds a slot of memory.
constexpr size_t kMostHelpers = 4;
// Chunks in flight beyond one per helper: enough that a helper rarely waits for the writer (a
// single helper has the 4 slots it had before there were more).
constexpr size_t kSpareSlots = 3;
// The slots together hold at most 1/kWorkShare of the bytes computed (and their count of ranges
// of kLargestChunkBytes): a transposed matrix is computed in ranges of up to a quarter of it, so
// a 131 MB lm_head alone filled 131 MB of slots, 17 % of a 2-layer LLaMA's weights, where the
// memory an export adds to torch.export's is to stay under 10 % of them.
constexpr size_t kWorkShare = 16;

}  // namespace

Prefetcher::Prefetcher(std::vector<const TensorBytes*> order) : order_(std::move(order)) {
  size_t work = 0;
  bool independent = false;  // whether any tensor's ranges may be computed at once
  for (const TensorBytes* t : order_) {
    work += t->size();
    independent = independent || t->independent_ranges();
  }
  const size_t cores = std::thread::hardware_concurrency();
  if (work == 0 || cores < 2) return;
  // One helper when no tensor can use a second.
  const size_t helpers = independent ? std::min(cores, kMostHelpers) : 1;
  const size_t slots = helpers + kSpareSlots;
  most_ = std::clamp(work / kWorkShare / slots, kTensorChunkBytes, kLargestChunkBytes);
  slots_.resize(slots);
  for (size_t i = 0; i < slots; ++i) free_.push_back(i);
  for (size_t i = 0; i < helpers; ++i) helpers_.emplace_back([this] { run(); });
}

Prefetcher::~Prefetcher() {
  if (helpers_.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
  for (std::thread& helper : helpers_) helper.join();
}

bool Prefetcher::may_take() const {
  if (free_.empty() || computing_serial_) return false;
  // A tensor computed a chunk at a time runs alone, as with a single helper.
  return order_[tensor_]->independent_ranges() || computing_ == 0;
}

Prefetcher::Task Prefetcher::take() {
  const TensorBytes* t = order_[tensor_];
  if (at_ == 0) chunk_ = t->chunk_bytes(kTensorChunkBytes, most_);
  const size_t total = t->size(), n = std::min(chunk_, total - at_);
  Task task{t, at_, n, consumed_ + chunks_.size(), t->independent_ranges()};
  const size_t slot = free_.back();
  free_.pop_back();
  chunks_.push_back(Chunk{slot, n, at_ + n == total, false});
  at_ += n;
  if (at_ == total) {
    at_ = 0;
    ++tensor_;
  }
  ++computing_;
  computing_serial_ = computing_serial_ || !task.independent;
  return task;
}

void Prefetcher::run() {
  for (;;) {
    Task task;
    size_t slot;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      changed_.wait(lock, [&] {
        while (tensor_ < order_.size() && order_[tensor_]->size() == 0) ++tensor_;  // no chunk to take
        return stop_ || error_ || tensor_ == order_.size() || may_take();
      });
      if (stop_ || error_ || tensor_ == order_.size()) return;
      task = take();
      slot = chunks_[task.sequence - consumed_].slot;
    }
    // The slot is this thread's until the chunk is marked done.
    std::exception_ptr error;
    try {
      AlignedBytes& buffer = slots_[slot];
      buffer.reserve(task.size);
      task.tensor->fill(task.at, task.at + task.size, buffer.data());
    } catch (...) {
      error = std::current_exception();
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (error) {
        // No helper takes another chunk; those taken are finished, and the writer gets each
        // chunk before this one, then the error (produce).
        if (!error_) error_ = error;
      } else {
        chunks_[task.sequence - consumed_].done = true;
      }
      --computing_;
      if (!task.independent) computing_serial_ = false;
    }
    changed_.notify_all();
    if (error) return;
  }
}

void Prefetcher::produce(const TensorBytes& bytes, const ByteSink& sink) {
  if (next_ >= order_.size() || order_[next_] != &bytes) {
    throw std::logic_error("a computed tensor was asked for out of the prefetched order");
  }
  ++next_;
  if (helpers_.empty()) {
    bytes.produce(sink);
    return;
  }
  for (bool last = bytes.size() == 0; !last;) {
    Chunk chunk;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      // After a helper's error, the chunks taken before are still handed over.
      changed_.wait(lock, [&] { return (!chunks_.empty() && chunks_.front().done) || (error_ && computing_ == 0); });
      if (chunks_.empty() || !chunks_.front().done) std::rethrow_exception(error_);
      chunk = chunks_.front();
    }
    sink(slots_[chunk.slot].data(), chunk.size);  // may throw: the destructor then stops the helpers
    {
      std::lock_guard<std::mutex> lock(mutex_);
      chunks_.pop_front();
      ++consumed_;
      free_.push_back(chunk.slot);
    }
    changed_.notify_all();
    last = chunk.last;
  }
}

}  // namespace fastonnx
