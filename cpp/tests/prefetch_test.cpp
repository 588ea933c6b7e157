// The Prefetcher (prefetch.h): tensors' bytes computed by helper threads, handed to the writer in
// order, whether the tensors' ranges are computed at once (quantized weights) or one at a time
// (transposes), with tensors of no bytes among them, and a helper's error rethrown to the writer.
#include "fastonnx/prefetch.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <thread>
#include <vector>

namespace fastonnx {
namespace {

// Byte i of tensor `id`.
uint8_t byte_of(int id, size_t i) { return static_cast<uint8_t>((id * 31 + i) % 251); }

// The most ranges computed at once, of any tensor.
std::atomic<int> most_at_once{0};

void raise_to(int now, std::atomic<int>& most) {
  int seen = most.load();
  while (now > seen && !most.compare_exchange_weak(seen, now)) {}
}

// A tensor of those bytes that records how many ranges are computed at once.
class Counted final : public TensorBytes {
 public:
  Counted(int id, size_t size, bool independent, std::atomic<int>* running, std::atomic<int>* most_serial_with,
          bool fail = false)
      : id_(id), size_(size), independent_(independent), running_(running), most_(most_serial_with), fail_(fail) {}

  int id() const { return id_; }
  size_t size() const override { return size_; }
  bool independent_ranges() const override { return independent_; }
  size_t chunk_bytes(size_t /*target*/, size_t /*most*/) const override { return 4096; }
  void fill(size_t begin, size_t end, uint8_t* out) const override {
    const int now = ++*running_;
    raise_to(now, most_at_once);
    if (!independent_) raise_to(now, *most_);
    std::this_thread::sleep_for(std::chrono::microseconds(200));  // long enough for helpers to overlap
    if (fail_) {
      --*running_;
      throw std::runtime_error("helper failed");
    }
    for (size_t i = begin; i < end; ++i) out[i - begin] = byte_of(id_, i);
    --*running_;
  }
  std::span<const uint8_t> source() const override { return {}; }
  bool same_bytes(const TensorBytes& /*other*/) const override { return false; }

 private:
  int id_;
  size_t size_;
  bool independent_;
  std::atomic<int>* running_;
  std::atomic<int>* most_;
  bool fail_;
};

TEST(Prefetcher, HandsEveryTensorOverInOrderAndRunsTransposesAlone) {
  std::atomic<int> running{0}, most_serial_with{0};
  std::vector<std::unique_ptr<Counted>> tensors;
  // Independent and serial tensors interleaved, of whole and partial chunks, and empty ones.
  const size_t sizes[] = {40000, 0, 9000, 4096, 0, 50001, 123, 30000};
  const bool independent[] = {true, true, false, true, false, true, false, true};
  std::vector<const TensorBytes*> order;
  for (int i = 0; i < 8; ++i) {
    tensors.push_back(std::make_unique<Counted>(i, sizes[i], independent[i], &running, &most_serial_with));
    order.push_back(tensors.back().get());
  }
  order.push_back(tensors[0].get());  // a tensor may come twice
  Prefetcher ahead(order);
  for (const TensorBytes* t : order) {
    const int id = static_cast<const Counted*>(t)->id();
    std::vector<uint8_t> got;
    produce_computed(
        *t,
        [&](const void* data, size_t n) {
          const auto* p = static_cast<const uint8_t*>(data);
          got.insert(got.end(), p, p + n);
        },
        &ahead);
    std::vector<uint8_t> want(t->size());
    for (size_t i = 0; i < want.size(); ++i) want[i] = byte_of(id, i);
    EXPECT_EQ(got, want) << "tensor " << id;
  }
  // A range of a serial tensor never ran beside another range; the others did, where two cores
  // let them.
  EXPECT_EQ(most_serial_with.load(), 1);
  if (std::thread::hardware_concurrency() >= 2) EXPECT_GE(most_at_once.load(), 2);
}

TEST(Prefetcher, RethrowsAHelpersError) {
  std::atomic<int> running{0}, most{0};
  Counted good(0, 20000, true, &running, &most), bad(1, 20000, true, &running, &most, /*fail=*/true);
  Prefetcher ahead({&good, &bad, &good});
  size_t got = 0;
  produce_computed(good, [&](const void*, size_t n) { got += n; }, &ahead);
  EXPECT_EQ(got, 20000u);
  EXPECT_THROW(produce_computed(bad, [](const void*, size_t) {}, &ahead), std::runtime_error);
}

TEST(Prefetcher, AskedOutOfOrderIsALogicError) {
  std::atomic<int> running{0}, most{0};
  Counted a(0, 10000, true, &running, &most), b(1, 10000, true, &running, &most);
  Prefetcher ahead({&a, &b});
  EXPECT_THROW(produce_computed(b, [](const void*, size_t) {}, &ahead), std::logic_error);
}

}  // namespace
}  // namespace fastonnx
