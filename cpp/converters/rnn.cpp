// Recurrent layers: torch's multi-layer LSTM, GRU and Elman RNN as one ONNX LSTM/GRU/RNN node
// per layer (both directions in one node), the layers chained.
//
// torch passes the weights as one flat list, per layer and direction: w_ih, w_hh, then b_ih,
// b_hh when has_biases (then w_hr for an LSTM with proj_size). ONNX stacks the directions and
// orders the gates differently; the weights are reordered with Gather (constants fold it away).
#include <string>

#include "common.h"

namespace fastonnx {
namespace {

struct CellKind {
  const char* op;
  int64_t gates;
  std::vector<int64_t> onnx_gate_order;  // torch's gate index for each ONNX gate
  Attrs attrs;                           // beyond hidden_size and direction
  int n_outputs;                         // Y, Y_h (, Y_c)
};

// Gate order: LSTM torch (i, f, g, o) -> ONNX (i, o, f, c); GRU torch (r, z, n) -> ONNX (z, r, h).
// torch's GRU applies the reset gate after the recurrent matmul: linear_before_reset.
const CellKind kLstm = {"LSTM", 4, {0, 3, 1, 2}, {}, 3};
const CellKind kGru = {"GRU", 3, {1, 0, 2}, {Attr::i("linear_before_reset", 1)}, 2};

CellKind elman(const char* activation, bool bidirectional) {
  std::vector<std::string> activations(bidirectional ? 2 : 1, activation);
  return {"RNN", 1, {0}, {Attr::strings("activations", activations)}, 2};
}

// Rows of a (gates*hidden, ...) weight or bias in ONNX's gate order, as Gather indices.
Value gate_rows(Builder& b, const CellKind& cell, int64_t hidden) {
  std::vector<int64_t> rows;
  for (int64_t gate : cell.onnx_gate_order) {
    for (int64_t i = 0; i < hidden; ++i) rows.push_back(gate * hidden + i);
  }
  return b.ints(rows);
}

Value stack_directions(Builder& b, const std::vector<Value>& per_direction) {
  const Value first = b.ints(std::vector<int64_t>{0});
  std::vector<Value> items;
  for (Value v : per_direction) items.push_back(b.op("Unsqueeze", {v, first}));
  return items.size() == 1 ? items[0] : b.op("Concat", spread(items), {Attr::i("axis", 0)});
}

// Runs the layers; returns the last layer's output and the final states ((h,) or (h, c)), each
// (layers*directions, batch, hidden) like torch's.
std::vector<Value> recurrent(Builder& b, const CellKind& cell, Value input, const std::vector<Value>& states,
                             const std::vector<Value>& params, bool has_biases, int64_t num_layers, double dropout,
                             bool train, bool bidirectional, bool batch_first) {
  if (train && dropout > 0) {
    b.fail("dropout between recurrent layers in training mode is random; export the model in eval mode");
  }
  if (b.rank(input) != 3) b.fail("a recurrent layer needs a batched input of rank 3");
  const int64_t directions = bidirectional ? 2 : 1;
  const int64_t per_direction = has_biases ? 4 : 2;
  if (static_cast<int64_t>(params.size()) != num_layers * directions * per_direction) {
    if (cell.n_outputs == 3 && static_cast<int64_t>(params.size()) == num_layers * directions * (per_direction + 1)) {
      b.fail("LSTM with proj_size has no ONNX form (ONNX's LSTM has no projection of the hidden state)");
    }
    b.fail("expected " + std::to_string(num_layers * directions * per_direction) + " weights for " +
           std::to_string(num_layers) + " layer(s), got " + std::to_string(params.size()));
  }
  const auto w_hh = b.static_shape(params[1]);
  if (!w_hh) b.fail("recurrent weights need a static shape");
  const int64_t hidden = (*w_hh)[1];
  const Value rows = gate_rows(b, cell, hidden);
  const auto reordered = [&](Value w) { return b.op("Gather", {w, rows}, {Attr::i("axis", 0)}); };
  Attrs attrs = cell.attrs;
  attrs.push_back(Attr::i("hidden_size", hidden));
  attrs.push_back(Attr::s("direction", bidirectional ? "bidirectional" : "forward"));

  const std::vector<int64_t> swap_batch_and_time = {1, 0, 2};
  Value x = batch_first ? b.op("Transpose", {input}, {Attr::ints("perm", swap_batch_and_time)}) : input;
  std::vector<std::vector<Value>> finals(states.size());
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<Value> w, r, bias;
    for (int64_t d = 0; d < directions; ++d) {
      const size_t at = static_cast<size_t>((layer * directions + d) * per_direction);
      w.push_back(reordered(params[at]));
      r.push_back(reordered(params[at + 1]));
      if (has_biases) {
        bias.push_back(b.op("Concat", {reordered(params[at + 2]), reordered(params[at + 3])}, {Attr::i("axis", 0)}));
      }
    }
    Inputs inputs = {x, stack_directions(b, w), stack_directions(b, r)};
    inputs.push_back(has_biases ? std::optional(stack_directions(b, bias)) : std::nullopt);
    inputs.push_back(std::optional<Value>());  // sequence_lens: every sequence is whole
    const Value first = b.ints(std::vector<int64_t>{layer * directions});
    const Value end = b.ints(std::vector<int64_t>{(layer + 1) * directions});
    for (Value state : states) inputs.push_back(b.op("Slice", {state, first, end}));
    const std::vector<Value> outs = b.op_n(cell.op, inputs, attrs, cell.n_outputs);
    // Y (time, directions, batch, hidden) -> (time, batch, directions*hidden), the next input.
    const Value y = b.op("Transpose", {outs[0]}, {Attr::ints("perm", {0, 2, 1, 3})});
    x = b.op("Reshape", {y, b.ints(std::vector<int64_t>{0, 0, -1})});
    for (size_t s = 0; s < states.size(); ++s) finals[s].push_back(outs[1 + s]);
  }
  std::vector<Value> results = {batch_first ? b.op("Transpose", {x}, {Attr::ints("perm", swap_batch_and_time)}) : x};
  for (const auto& per_layer : finals) {
    results.push_back(per_layer.size() == 1 ? per_layer[0] : b.op("Concat", spread(per_layer), {Attr::i("axis", 0)}));
  }
  return results;
}

}  // namespace

namespace manual {

std::array<Value, 3> lstm_input(Builder& b, Value input, std::vector<Value> hx, std::vector<Value> params,
                                bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                                bool batch_first) {
  if (hx.size() != 2) b.fail("an LSTM takes two initial states (h0, c0)");
  const auto out = recurrent(b, kLstm, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                             batch_first);
  return {out[0], out[1], out[2]};
}

std::array<Value, 2> gru_input(Builder& b, Value input, Value hx, std::vector<Value> params, bool has_biases,
                               int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first) {
  const auto out = recurrent(b, kGru, input, {hx}, params, has_biases, num_layers, dropout, train, bidirectional,
                             batch_first);
  return {out[0], out[1]};
}

std::array<Value, 2> rnn_tanh_input(Builder& b, Value input, Value hx, std::vector<Value> params, bool has_biases,
                                    int64_t num_layers, double dropout, bool train, bool bidirectional,
                                    bool batch_first) {
  const auto out = recurrent(b, elman("Tanh", bidirectional), input, {hx}, params, has_biases, num_layers, dropout,
                             train, bidirectional, batch_first);
  return {out[0], out[1]};
}

std::array<Value, 2> rnn_relu_input(Builder& b, Value input, Value hx, std::vector<Value> params, bool has_biases,
                                    int64_t num_layers, double dropout, bool train, bool bidirectional,
                                    bool batch_first) {
  const auto out = recurrent(b, elman("Relu", bidirectional), input, {hx}, params, has_biases, num_layers, dropout,
                             train, bidirectional, batch_first);
  return {out[0], out[1]};
}

}  // namespace manual
}  // namespace fastonnx
