#include "fastonnx/proto_writer.h"

#include <algorithm>
#include <cstring>

#include "fastonnx/prefetch.h"

namespace fastonnx {

void ProtoMessage::raw_varint(uint64_t v) {
  while (v >= 0x80) {
    runs_.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
    ++size_;
  }
  runs_.push_back(static_cast<char>(v));
  ++size_;
}

void ProtoMessage::varint_field(uint32_t field, uint64_t v) {
  tag(field, 0);
  raw_varint(v);
}

void ProtoMessage::float_field(uint32_t field, float v) {
  tag(field, 5);
  char bytes[4];
  std::memcpy(bytes, &v, 4);
  runs_.append(bytes, 4);
  size_ += 4;
}

void ProtoMessage::bytes_field(uint32_t field, std::string_view s) {
  tag(field, 2);
  raw_varint(s.size());
  runs_.append(s.data(), s.size());
  size_ += s.size();
}

void ProtoMessage::packed_int64_field(uint32_t field, const std::vector<int64_t>& values) {
  ProtoMessage body;
  for (int64_t v : values) body.raw_varint(static_cast<uint64_t>(v));
  bytes_field(field, body.runs_);
}

void ProtoMessage::packed_float_field(uint32_t field, const std::vector<float>& values) {
  std::string body(values.size() * 4, '\0');
  if (!values.empty()) std::memcpy(body.data(), values.data(), body.size());
  bytes_field(field, body);
}

void ProtoMessage::borrowed_bytes_field(uint32_t field, const void* data, size_t size) {
  tag(field, 2);
  raw_varint(size);
  spans_.push_back(Span{runs_.size(), data, size, nullptr});
  size_ += size;
}

void ProtoMessage::computed_bytes_field(uint32_t field, const TensorBytes* bytes) {
  tag(field, 2);
  const size_t size = bytes->size();
  raw_varint(size);
  spans_.push_back(Span{runs_.size(), nullptr, size, bytes});
  size_ += size;
}

void ProtoMessage::message_field(uint32_t field, const ProtoMessage& child) {
  tag(field, 2);
  raw_varint(child.size_);
  const size_t offset = runs_.size();
  for (const Span& s : child.spans_) spans_.push_back(Span{offset + s.run_end, s.data, s.size, s.computed});
  runs_ += child.runs_;
  size_ += child.size_;
}

void ProtoMessage::produce(const ByteSink& sink, Prefetcher* ahead) const {
  size_t written = 0;  // bytes of runs_ already produced
  for (const Span& s : spans_) {
    if (s.run_end > written) sink(runs_.data() + written, s.run_end - written);
    written = s.run_end;
    if (s.computed != nullptr) {
      produce_computed(*s.computed, sink, ahead);
    } else if (s.size) {
      sink(s.data, s.size);
    }
  }
  if (runs_.size() > written) sink(runs_.data() + written, runs_.size() - written);
}

std::vector<const TensorBytes*> ProtoMessage::computed() const {
  std::vector<const TensorBytes*> order;
  for (const Span& s : spans_) {
    if (s.computed != nullptr) order.push_back(s.computed);
  }
  return order;
}

std::string ProtoMessage::to_string() const {
  std::string out;
  out.reserve(size_);
  produce([&](const void* data, size_t size) { out.append(static_cast<const char*>(data), size); });
  return out;
}

}  // namespace fastonnx
