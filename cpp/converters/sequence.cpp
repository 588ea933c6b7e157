// ONNX sequences: a scripted list whose length the graph computes (`List[Tensor]` a loop of a
// computed trip count appends to, the TorchScript front end's); an If or Loop returning one
// returns a sequence too (Session::control_flow).
#include "common.h"
#include "converters_sequence.h"

namespace fastonnx {
namespace {

constexpr int kSequenceOpset = 11;  // ONNX's sequence ops

void need_sequences(Builder& b) {
  if (b.opset() < kSequenceOpset) {
    b.fail("a list whose length the graph computes is an ONNX sequence, which needs opset " +
           std::to_string(kSequenceOpset) + " or later");
  }
}

Value sequence(Builder& b, Value v) {
  b.mark_sequence(v);
  return v;
}

}  // namespace

namespace manual {

Value fastonnx_sequence_empty(Builder& b, ScalarType dtype) {
  need_sequences(b);
  return sequence(b, b.op<"SequenceEmpty">(Attrs{Attr::i("dtype", onnx_dtype(dtype))}));
}

Value fastonnx_sequence_append(Builder& b, Value seq, Value x) {
  need_sequences(b);
  return sequence(b, b.op<"SequenceInsert">({seq, x}));
}

Value fastonnx_sequence_at(Builder& b, Value seq, Value position) {
  need_sequences(b);
  return b.op<"SequenceAt">({seq, position});
}

Value fastonnx_sequence_length(Builder& b, Value seq) {
  need_sequences(b);
  return b.op<"SequenceLength">({seq});
}

Value fastonnx_sequence_stack(Builder& b, Value seq, int64_t dim, bool new_axis) {
  need_sequences(b);
  return b.op<"ConcatFromSequence">({seq}, {Attr::i("axis", dim), Attr::i("new_axis", new_axis ? 1 : 0)});
}

}  // namespace manual
}  // namespace fastonnx
