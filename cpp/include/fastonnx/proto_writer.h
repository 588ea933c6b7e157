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

namespace fastonnx {

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
  void message_field(uint32_t field, const ProtoMessage& child);

  size_t size() const { return size_; }
  // Hands the message's bytes to `sink(data, size)` in order, in pieces of at most `max_piece`
  // bytes (so a writer can stop between them); stops and returns false when `sink` does.
  bool for_each_piece(size_t max_piece, const std::function<bool(const char*, size_t)>& sink) const;
  std::string to_string() const;

 private:
  struct Span {
    size_t run_end;  // the span comes after runs_[0, run_end)
    const void* data;
    size_t size;
  };
  void tag(uint32_t field, uint32_t wire_type) { raw_varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  void raw_varint(uint64_t v);

  std::string runs_;
  std::vector<Span> spans_;  // borrowed spans, in order
  size_t size_ = 0;
};

}  // namespace fastonnx
