// Padding: constant, reflect, replicate (ONNX's edge) and circular (ONNX's wrap, from opset 19).
#include <algorithm>
#include <limits>
#include <string>

#include "common.h"
#include "converters_padding.h"

namespace fastonnx {

namespace {

constexpr int64_t kToTheEnd = std::numeric_limits<int64_t>::max();

enum class Mode { Constant, Reflect, Replicate, Circular };

// ONNX Pad's pads (every dim's begin, then every dim's end) from torch's list, which pairs
// (begin, end) from the last dim backwards.
SymIntList onnx_pads(Builder& b, const SymIntList& pad, int64_t rank) {
  if (pad.size() % 2 != 0 || static_cast<int64_t>(pad.size() / 2) > rank) {
    b.fail("pad takes (begin, end) pairs for at most every dim: got " + std::to_string(pad.size()) +
           " values for a tensor of rank " + std::to_string(rank));
  }
  SymIntList out(static_cast<size_t>(2 * rank), SymInt(int64_t{0}));
  for (size_t i = 0; i < pad.size() / 2; ++i) {
    const int64_t dim = rank - 1 - static_cast<int64_t>(i);
    out[dim] = pad[2 * i];
    out[rank + dim] = pad[2 * i + 1];
  }
  return out;
}

bool all_zero(const SymIntList& pads) {
  for (const SymInt& p : pads) {
    if (!p.is_static() || p.value != 0) return false;
  }
  return true;
}

// Crops the dims whose pads are negative (ONNX leaves negative pads undefined).
Value crop(Builder& b, Value x, const SymIntList& pads) {
  const int64_t rank = static_cast<int64_t>(pads.size() / 2);
  std::vector<int64_t> starts, ends, axes;
  for (int64_t d = 0; d < rank; ++d) {
    const SymInt& begin = pads[d];
    const SymInt& end = pads[rank + d];
    const bool crop_begin = begin.is_static() && begin.value < 0, crop_end = end.is_static() && end.value < 0;
    if (!crop_begin && !crop_end) continue;
    starts.push_back(crop_begin ? -begin.value : 0);
    ends.push_back(crop_end ? end.value : kToTheEnd);
    axes.push_back(d);
  }
  if (axes.empty()) return x;
  return b.op<"Slice">({x, b.ints(starts), b.ints(ends), b.ints(axes)});
}

// The pads with their negative items set to 0, for Pad. A symbolic pad goes to Pad as it is
// (onnxruntime crops for a negative one).
SymIntList growth(SymIntList pads) {
  for (SymInt& p : pads) {
    if (p.is_static() && p.value < 0) p = SymInt(int64_t{0});
  }
  return pads;
}

// Circular padding before opset 19: per dim, the last `begin` elements go in front and the first
// `end` ones behind (torch allows pads up to the size).
Value wrap_by_concat(Builder& b, Value x, const SymIntList& pads) {
  const int64_t rank = static_cast<int64_t>(pads.size() / 2);
  for (int64_t d = 0; d < rank; ++d) {
    const SymInt& begin = pads[d];
    const SymInt& end = pads[rank + d];
    const Value axis = b.ints(std::vector<int64_t>{d});
    std::vector<Value> parts;
    if (!begin.is_static() || begin.value > 0) {
      const Value from =
          begin.is_static() ? b.ints(std::vector<int64_t>{-begin.value}) : b.op<"Neg">({b.ints(SymIntList{begin})});
      parts.push_back(b.op<"Slice">({x, from, b.ints(std::vector<int64_t>{kToTheEnd}), axis}));
    }
    parts.push_back(x);
    if (!end.is_static() || end.value > 0) {
      parts.push_back(b.op<"Slice">({x, b.ints(std::vector<int64_t>{0}), b.ints(SymIntList{end}), axis}));
    }
    if (parts.size() > 1) x = b.op<"Concat">(spread(parts), {Attr::i("axis", d)});
  }
  return x;
}

Value pad_nd(Builder& b, Value self, const SymIntList& pad, Mode mode, const Scalar& value = int64_t{0}) {
  const SymIntList pads = onnx_pads(b, pad, b.rank(self));
  if (all_zero(pads)) return self;
  const SymIntList grow = growth(pads);
  const auto pad_op = [&](Value x, const char* onnx_mode) {
    if (all_zero(grow)) return x;
    Inputs inputs = {x, b.ints(grow)};
    if (mode == Mode::Constant) inputs.push_back(b.scalar_like(value, x));
    return b.op<"Pad">(inputs, {Attr::s("mode", onnx_mode)});
  };
  switch (mode) {
    case Mode::Constant:
      return crop(b, pad_op(self, "constant"), pads);
    // torch's reflection and replication index the uncropped input, so crop after padding.
    case Mode::Reflect:
      return crop(b, pad_op(self, "reflect"), pads);
    case Mode::Replicate:
      return crop(b, pad_op(self, "edge"), pads);
    // torch's circular padding wraps the cropped tensor.
    case Mode::Circular: {
      const Value cropped = crop(b, self, pads);
      // onnxruntime's wrap mode fails on an empty input; Concat handles it.
      const auto shape = b.static_shape(self);
      const bool empty = shape && std::find(shape->begin(), shape->end(), 0) != shape->end();
      if (b.opset() >= 19 && !empty) return pad_op(cropped, "wrap");
      return wrap_by_concat(b, cropped, grow);
    }
  }
  b.fail("unknown padding mode");
}

}  // namespace

// torch's padding `mode` ("constant", with `value`; "reflect", "replicate" or "circular").
Value padded(Builder& b, Value self, const SymIntList& pad, std::string_view mode, const Scalar& value) {
  if (mode == "constant") return pad_nd(b, self, pad, Mode::Constant, value);
  if (mode == "reflect") return pad_nd(b, self, pad, Mode::Reflect);
  if (mode == "replicate") return pad_nd(b, self, pad, Mode::Replicate);
  if (mode == "circular") return pad_nd(b, self, pad, Mode::Circular);
  b.fail("pad: unknown mode '" + std::string(mode) + "'; torch's modes are constant, reflect, replicate and circular");
}

namespace manual {

Value pad(Builder& b, Value self, SymIntList pad, std::string mode, std::optional<double> value) {
  if (mode != "constant" && value && *value != 0.0) {
    b.fail("pad: a fill value is only for mode 'constant', got mode '" + mode + "'");
  }
  return padded(b, self, pad, mode, Scalar(value.value_or(0.0)));
}

}  // namespace manual
}  // namespace fastonnx
