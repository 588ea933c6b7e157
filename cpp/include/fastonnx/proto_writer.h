// Protobuf wire-format writing for the ModelProto. Hand-written rather than libprotobuf because
// the weights must go from torch's memory to the file without being copied into message
// objects (and without protobuf's 2 GB message limit on that path): a message here is a list of
// owned byte runs and borrowed spans, and only the runs are ever copied.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "fastonnx/tensor_bytes.h"

namespace fastonnx {

class Prefetcher;

class ProtoMessage {
 public:
  void varint_field(uint32_t field, uint64_t v);
  void int64_field(uint32_t field, int64_t v) { varint_field(field, static_cast<uint64_t>(v)); }
  void float_field(uint32_t field, float v);
  void bytes_field(uint32_t field, std::string_view s);
  void packed_int64_field(uint32_t field, const std::vector<int64_t>& values);
  void packed_float_field(uint32_t field, const std::vector<float>& values);
  // Appends a length-delimited field whose bytes stay where they are (a weight).
  void borrowed_bytes_field(uint32_t field, const void* data, size_t size);
  // Appends a length-delimited field whose bytes are produced while writing; `bytes` must
  // outlive the message.
  void computed_bytes_field(uint32_t field, const TensorBytes* bytes);
  void message_field(uint32_t field, const ProtoMessage& child);

  size_t size() const { return size_; }
  std::string to_string() const;
  // Calls `sink` with the message's bytes in order; computed fields come from `ahead` when
  // given (built from computed()), else they are computed in line.
  void produce(const ByteSink& sink, Prefetcher* ahead = nullptr) const;
  // The computed fields, in the order produce() writes them.
  std::vector<const TensorBytes*> computed() const;

 private:
  struct Span {
    size_t run_end;  // the span comes after runs_[0, run_end)
    const void* data;
    size_t size;
    const TensorBytes* computed;  // when set, the span's bytes (data is null)
  };
  void tag(uint32_t field, uint32_t wire_type) { raw_varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void raw_varint(uint64_t v);

  std::string runs_;
  std::vector<Span> spans_;  // borrowed spans, in order
  size_t size_ = 0;
};

}  // namespace fastonnx
