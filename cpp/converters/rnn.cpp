// Recurrent layers: torch's multi-layer LSTM, GRU and Elman RNN as one ONNX LSTM/GRU/RNN node
// per layer (both directions in one node), the layers chained.
//
// torch passes the weights as one flat list, per layer and direction: w_ih, w_hh, then b_ih,
// b_hh when has_biases, then w_hr for an LSTM with proj_size. ONNX stacks the directions and
// orders the gates differently; the weights are reordered with Gather (constants fold it away).
//
// A padded batch with each entry's length (fastonnx::padded_rnn, the TorchScript front end's
// packed sequences) runs as the same nodes with ONNX's sequence_lens: outputs past an entry's
// length are zero, and each direction's final state is the one at the entry's own last step (the
// reverse direction starts there), as torch's packed layers give them.
#include <limits>
#include <string>

#include "common.h"
#include "converters_rnn.h"

namespace fastonnx {
namespace {

struct CellKind {
  OpType op;
  int64_t gates;
  std::vector<int64_t> onnx_gate_order;  // torch's gate index for each ONNX gate
  Attrs attrs;                           // beyond hidden_size and direction
  int n_outputs;                         // Y, Y_h (, Y_c)
};

// Gate order: LSTM torch (i, f, g, o) -> ONNX (i, o, f, c); GRU torch (r, z, n) -> ONNX (z, r, h).
// torch's GRU applies the reset gate after the recurrent matmul: linear_before_reset.
CellKind lstm() { return {"LSTM", 4, {0, 3, 1, 2}, {}, 3}; }
CellKind gru() { return {"GRU", 3, {1, 0, 2}, {Attr::i("linear_before_reset", 1)}, 2}; }

CellKind elman(const char* activation, bool bidirectional) {
  std::vector<std::string> activations(bidirectional ? 2 : 1, activation);
  return {"RNN", 1, {0}, {Attr::strings("activations", activations)}, 2};
}

// The cell of fastonnx::padded_rnn's `mode`, named as torch's ops are (aten::lstm, ...).
CellKind padded_cell(Builder& b, const std::string& mode, bool bidirectional) {
  if (mode == "lstm") return lstm();
  if (mode == "gru") return gru();
  if (mode == "rnn_tanh") return elman("Tanh", bidirectional);
  if (mode == "rnn_relu") return elman("Relu", bidirectional);
  b.fail("padded_rnn's mode is lstm, gru, rnn_tanh or rnn_relu, not `" + mode + "`");
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
  for (Value v : per_direction) items.push_back(b.op<"Unsqueeze">({v, first}));
  return items.size() == 1 ? items[0] : b.op<"Concat">(spread(items), {Attr::i("axis", 0)});
}

// One layer and direction's weights in torch's flat list.
struct LayerWeights {
  Value w_ih, w_hh;
  std::optional<Value> b_ih, b_hh, w_hr;
};

// What one layer gives: its output (time, batch, directions*features), the next layer's input,
// and its final states, each (directions, batch, features).
struct LayerResult {
  Value output;
  std::vector<Value> finals;
};

Value first_dim_range(Builder& b, Value v, int64_t from, int64_t to) {
  return b.op<"Slice">(
      {v, b.ints(std::vector<int64_t>{from}), b.ints(std::vector<int64_t>{to}), b.ints(std::vector<int64_t>{0})});
}

Value concat(Builder& b, const std::vector<Value>& parts, int64_t axis) {
  return parts.size() == 1 ? parts[0] : b.op<"Concat">(spread(parts), {Attr::i("axis", axis)});
}

// A layer as one ONNX node for both directions.
LayerResult onnx_layer(Builder& b, const CellKind& cell, Value x, const std::vector<LayerWeights>& weights,
                       const std::vector<Value>& layer_states, const Value& rows, const Attrs& attrs,
                       const std::optional<Value>& sequence_lens) {
  const auto reordered = [&](Value w) { return b.op<"Gather">({w, rows}, {Attr::i("axis", 0)}); };
  std::vector<Value> w, r, bias;
  for (const LayerWeights& lw : weights) {
    w.push_back(reordered(lw.w_ih));
    r.push_back(reordered(lw.w_hh));
    if (lw.b_ih) bias.push_back(b.op<"Concat">({reordered(*lw.b_ih), reordered(*lw.b_hh)}, {Attr::i("axis", 0)}));
  }
  Inputs inputs = {x, stack_directions(b, w), stack_directions(b, r)};
  inputs.push_back(bias.empty() ? std::nullopt : std::optional(stack_directions(b, bias)));
  inputs.push_back(sequence_lens);
  for (Value state : layer_states) inputs.push_back(state);
  const std::vector<Value> outs = b.op_n(cell.op, inputs, attrs, cell.n_outputs);
  // Y (time, directions, batch, hidden) -> (time, batch, directions*hidden).
  const Value y = b.op<"Transpose">({outs[0]}, {Attr::ints("perm", {0, 2, 1, 3})});
  return {b.op<"Reshape">({y, b.ints(std::vector<int64_t>{0, 0, -1})}), {outs.begin() + 1, outs.end()}};
}

// An LSTM layer with proj_size P, which ONNX's LSTM lacks: torch feeds h = W_hr m back, where
// m = o * tanh(c) is ONNX's hidden state, so W_hh h = (W_hh W_hr) m and an ONNX LSTM with
// recurrence W_hh W_hr computes every step but the first, whose h0 (P features) has no m. The
// first step is computed here, the rest by the ONNX LSTM started from its m and c, and the
// outputs projected by W_hr. `steps` is the sequence length, static or not.
//
// With `lengths` (int64, each at least 1), the reverse direction runs forward over each entry
// reversed within its length (ReverseSequence), so that every entry's first step is at time 0;
// the ONNX LSTM then runs length - 1 steps of each, and an entry of length 1 keeps its first
// step's states.
LayerResult projected_lstm_layer(Builder& b, Value x, const Dim& steps, const std::vector<LayerWeights>& weights,
                                 const std::vector<Value>& layer_states, const Value& rows, int64_t hidden,
                                 const std::optional<Value>& lengths) {
  const Value zero_axis = b.ints(std::vector<int64_t>{0}), one_axis = b.ints(std::vector<int64_t>{1});
  const auto within_lengths = [&](Value v) {
    return b.op<"ReverseSequence">({v, *lengths}, {Attr::i("batch_axis", 1), Attr::i("time_axis", 0)});
  };
  const Attrs transpose = {Attr::ints("perm", {1, 0})};
  // Row i of the first dim (-1: the last).
  const auto row = [&](Value v, int64_t i) {
    return b.op<"Gather">({v, b.scalar(i, ScalarType::Long)}, {Attr::i("axis", 0)});
  };
  const auto times_transposed = [&](Value v, Value w) {
    return b.op<"MatMul">({v, b.op<"Transpose">({w}, transpose)});
  };
  std::vector<Value> outputs, finals_h, finals_c;
  for (size_t d = 0; d < weights.size(); ++d) {
    const LayerWeights& lw = weights[d];
    const auto index = static_cast<int64_t>(d);
    const bool reversed_within_lengths = d == 1 && lengths;
    const bool reverse = d == 1 && !lengths;  // the ONNX LSTM's direction
    const Value x_in = reversed_within_lengths ? within_lengths(x) : x;
    // The first step (the last for the reverse direction), with torch's gate order i, f, g, o.
    const int64_t first_step = reverse ? -1 : 0;
    Value gates = b.op<"Add">(
        {times_transposed(row(x_in, first_step), lw.w_ih), times_transposed(row(layer_states[0], index), lw.w_hh)});
    if (lw.b_ih) gates = b.op<"Add">({gates, b.op<"Add">({*lw.b_ih, *lw.b_hh})});
    const std::vector<Value> g =
        b.op_n<"Split">({gates, b.ints(std::vector<int64_t>(4, hidden))}, {Attr::i("axis", 1)}, 4);
    const Value c_first = b.op<"Add">({b.op<"Mul">({b.op<"Sigmoid">({g[1]}), row(layer_states[1], index)}),
                                       b.op<"Mul">({b.op<"Sigmoid">({g[0]}), b.op<"Tanh">({g[2]})})});
    const Value m_first = b.op<"Mul">({b.op<"Sigmoid">({g[3]}), b.op<"Tanh">({c_first})});
    Value m_sequence = b.op<"Unsqueeze">({m_first, zero_axis}), m_last = m_first, c_last = c_first;
    if (!steps.is_static() || steps.value > 1) {  // a dynamic length may be 1: the ONNX LSTM then runs no step
      const auto reordered = [&](Value w) { return b.op<"Gather">({w, rows}, {Attr::i("axis", 0)}); };
      const Value recurrence = reordered(b.op<"MatMul">({lw.w_hh, *lw.w_hr}));
      std::optional<Value> bias;
      if (lw.b_ih) {
        bias = b.op<"Unsqueeze">(
            {b.op<"Concat">({reordered(*lw.b_ih), reordered(*lw.b_hh)}, {Attr::i("axis", 0)}), zero_axis});
      }
      const Value rest =
          reverse ? first_dim_range(b, x_in, 0, -1) : first_dim_range(b, x_in, 1, std::numeric_limits<int64_t>::max());
      std::optional<Value> rest_lengths;
      if (lengths) rest_lengths = b.cast(b.op<"Sub">({*lengths, b.long_scalar(1)}), ScalarType::Int);
      const std::vector<Value> outs =
          b.op_n("LSTM",
                 {rest, b.op<"Unsqueeze">({reordered(lw.w_ih), zero_axis}), b.op<"Unsqueeze">({recurrence, zero_axis}),
                  bias, rest_lengths, b.op<"Unsqueeze">({m_first, zero_axis}), b.op<"Unsqueeze">({c_first, zero_axis})},
                 {Attr::i("hidden_size", hidden), Attr::s("direction", reverse ? "reverse" : "forward")}, 3);
      const Value m_rest = b.op<"Squeeze">({outs[0], one_axis});
      m_sequence =
          b.op<"Concat">(reverse ? Inputs{m_rest, m_sequence} : Inputs{m_sequence, m_rest}, {Attr::i("axis", 0)});
      m_last = b.op<"Squeeze">({outs[1], zero_axis});
      c_last = b.op<"Squeeze">({outs[2], zero_axis});
      if (lengths) {  // an entry of length 1: the LSTM ran no step of it
        const Value ran = b.op<"Unsqueeze">({b.op<"Greater">({*lengths, b.long_scalar(1)}), one_axis});
        m_last = b.op<"Where">({ran, m_last, m_first});
        c_last = b.op<"Where">({ran, c_last, c_first});
      }
    }
    if (reversed_within_lengths) m_sequence = within_lengths(m_sequence);
    outputs.push_back(times_transposed(m_sequence, *lw.w_hr));
    finals_h.push_back(b.op<"Unsqueeze">({times_transposed(m_last, *lw.w_hr), zero_axis}));
    finals_c.push_back(b.op<"Unsqueeze">({c_last, zero_axis}));
  }
  return {concat(b, outputs, 2), {concat(b, finals_h, 0), concat(b, finals_c, 0)}};
}

// Runs the layers; returns the last layer's output and the final states ((h,) or (h, c)), each
// (layers*directions, batch, features) like torch's. `lengths` (int64): each batch entry's length
// in a padded batch; absent when every entry is whole.
std::vector<Value> recurrent(Builder& b, const CellKind& cell, Value input, const std::vector<Value>& states,
                             const std::vector<Value>& params, bool has_biases, int64_t num_layers, double dropout,
                             bool train, bool bidirectional, bool batch_first,
                             const std::optional<Value>& lengths = std::nullopt) {
  if (train && dropout > 0) {
    b.fail("dropout between recurrent layers in training mode is random; export the model in eval mode");
  }
  if (b.rank(input) != 3) b.fail("a recurrent layer needs a batched input of rank 3");
  const int64_t directions = bidirectional ? 2 : 1;
  const int64_t plain = has_biases ? 4 : 2;
  const auto n_params = static_cast<int64_t>(params.size());
  const bool projected = cell.n_outputs == 3 && n_params == num_layers * directions * (plain + 1);
  const int64_t per_direction = projected ? plain + 1 : plain;
  if (n_params != num_layers * directions * per_direction) {
    b.fail("expected " + std::to_string(num_layers * directions * plain) + " weights for " +
           std::to_string(num_layers) + " layer(s), got " + std::to_string(params.size()));
  }
  const auto w_hh = b.static_shape(params[1]);
  if (!w_hh) b.fail("recurrent weights need a static shape");
  const int64_t hidden = (*w_hh)[0] / cell.gates;
  const Value rows = gate_rows(b, cell, hidden);
  Attrs attrs = cell.attrs;
  attrs.push_back(Attr::i("hidden_size", hidden));
  attrs.push_back(Attr::s("direction", bidirectional ? "bidirectional" : "forward"));
  const Dim steps = b.shape(input)[batch_first ? 1 : 0];
  const std::optional<Value> sequence_lens =
      lengths ? std::optional(b.cast(*lengths, ScalarType::Int)) : std::optional<Value>();

  const std::vector<int64_t> swap_batch_and_time = {1, 0, 2};
  Value x = batch_first ? b.op<"Transpose">({input}, {Attr::ints("perm", swap_batch_and_time)}) : input;
  std::vector<std::vector<Value>> finals(states.size());
  for (int64_t layer = 0; layer < num_layers; ++layer) {
    std::vector<LayerWeights> weights;
    for (int64_t d = 0; d < directions; ++d) {
      const auto at = static_cast<size_t>((layer * directions + d) * per_direction);
      LayerWeights lw{params[at], params[at + 1], {}, {}, {}};
      if (has_biases) {
        lw.b_ih = params[at + 2];
        lw.b_hh = params[at + 3];
      }
      if (projected) lw.w_hr = params[at + static_cast<size_t>(plain)];
      weights.push_back(lw);
    }
    std::vector<Value> layer_states;
    for (Value state : states)
      layer_states.push_back(first_dim_range(b, state, layer * directions, (layer + 1) * directions));
    const LayerResult result = projected
                                   ? projected_lstm_layer(b, x, steps, weights, layer_states, rows, hidden, lengths)
                                   : onnx_layer(b, cell, x, weights, layer_states, rows, attrs, sequence_lens);
    x = result.output;
    for (size_t s = 0; s < states.size(); ++s) finals[s].push_back(result.finals[s]);
  }
  std::vector<Value> results = {batch_first ? b.op<"Transpose">({x}, {Attr::ints("perm", swap_batch_and_time)}) : x};
  for (const auto& per_layer : finals) results.push_back(concat(b, per_layer, 0));
  return results;
}

}  // namespace

namespace manual {

std::array<Value, 3> lstm_input(Builder& b, Value input, std::vector<Value> hx, std::vector<Value> params,
                                bool has_biases, int64_t num_layers, double dropout, bool train, bool bidirectional,
                                bool batch_first) {
  if (hx.size() != 2) b.fail("an LSTM takes two initial states (h0, c0)");
  const auto out =
      recurrent(b, lstm(), input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
  return {out[0], out[1], out[2]};
}

std::array<Value, 2> gru_input(Builder& b, Value input, Value hx, std::vector<Value> params, bool has_biases,
                               int64_t num_layers, double dropout, bool train, bool bidirectional, bool batch_first) {
  const auto out =
      recurrent(b, gru(), input, {hx}, params, has_biases, num_layers, dropout, train, bidirectional, batch_first);
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

std::array<Value, 3> fastonnx_padded_rnn(Builder& b, std::string mode, Value input, Value lengths,
                                         std::vector<Value> hx, std::vector<Value> params, bool has_biases,
                                         int64_t num_layers, bool bidirectional) {
  const CellKind cell = padded_cell(b, mode, bidirectional);
  if (hx.size() != static_cast<size_t>(cell.n_outputs - 1)) {
    b.fail("a padded " + mode + " layer takes " + std::to_string(cell.n_outputs - 1) + " initial state(s), got " +
           std::to_string(hx.size()));
  }
  const auto out = recurrent(b, cell, input, hx, params, has_biases, num_layers, 0.0, false, bidirectional, false,
                             b.cast(lengths, ScalarType::Long));
  // The third output is the cell state; a cell without one gives its hidden state again.
  return {out[0], out[1], out.size() == 3 ? out[2] : out[1]};
}

}  // namespace manual
}  // namespace fastonnx
