// Attention -> com.microsoft GroupQueryAttention.
//
// Matched from each Softmax backwards and forwards, on the ONNX graph:
//   present_k = Concat(past_k, k, axis=2)          (a graph input as past: a KV cache)
//   scores    = MatMul(q, Transpose(repeat(present_k), perm=[0,1,3,2])) * scale
//               [softcap: Mul(Tanh(Div(scores, c)), c)]
//   masked    = Where(mask, scores, -inf) | Add(scores, additive_mask)
//   probs     = Softmax(masked) [fully masked rows to 0: Where(Equal(ReduceMax(masked), -inf), 0, probs)]
//   out       = MatMul(probs, repeat(Concat(past_v, v, axis=2)))
// where repeat() is the grouped heads' Unsqueeze/Expand/Reshape (or nothing: plain multi-head
// attention), q, k and v are [B, N, S, H] and out goes back to [B, S, N * H] through
// Transpose/Reshape.
//
// GroupQueryAttention applies its own causal mask and reads the padding from seqlens_k, as
// right padding (its keys past seqlens_k[b] are hidden): a left-padded batch, which
// onnxruntime-genai feeds, does not fit that. So seqlens_k says every key is there (total - 1
// for every row) and the graph's own mask goes in as attention_bias (0 or the lowest float),
// which hides the padding wherever it is; query_seqlens (the query length for every row) lets a
// batch take several tokens with a past. What GroupQueryAttention adds on its own, causality
// and local_window_size, must then hide nothing the mask lets through: check_causal_mask
// (attention_mask_probe.h) establishes that the mask is causal with padding (and which window),
// by evaluating it on probe inputs. Attention whose mask fails that stays plain.
//
// With `share_cache`, the past may be a buffer longer than the past (onnxruntime-genai's
// past_present_share_buffer: the past and present are one allocation of max_length, which
// GroupQueryAttention recognises as the same memory and appends to in place). The graph's other
// readers of a past input then see a length that is not the past's: those are Shape nodes (the
// mask's key count, a cache position), and each becomes the logical shape, whose past length is
// the padding mask's width minus the query length. For every input genai or any caller feeds
// (the mask covers the past and the query: the graph's own mask already needs that) the two are
// the same number.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "attention_mask_probe.h"
#include "cone_evaluator.h"
#include "fastonnx/numeric.h"
#include "fastonnx/onnxruntime_passes.h"
#include "fastonnx/passes.h"

namespace fastonnx {

namespace {

// Static size of dim `i` of `v`, or -1.
int64_t static_dim(const Graph& g, Value v, size_t i) {
  const auto dims = g.shape(v);
  return i < dims.size() && dims[i].is_static() ? dims[i].value : -1;
}

bool has_perm(const Graph& g, NodeId n, const std::vector<int64_t>& perm) {
  const Attr* a = g.attr(n, "perm", Attr::Kind::Ints);
  return a != nullptr && a->as_ints() == perm;
}

// One attention as matched, before it is known whether its mask fits.
struct Match {
  NodeId softmax;
  Value q, k, v, past_k, past_v, present_k, present_v;
  Value mask;
  MaskKind mask_kind = MaskKind::Boolean;
  double scale = 1.0, softcap = 0.0;
  int64_t num_heads = 0, kv_num_heads = 0, head_size = 0;
  NodeId out_node;  // the MatMul of probs and values
  Value out;        // [B, N, S, H]
};

// A fused attention's cache, for share_cache.
struct Fused {
  size_t index;
  Value past_k, past_v, present_k, present_v, padding;
};

class AttentionFusion {
 public:
  AttentionFusion(Graph& g, const AttentionOptions& options, RewriteReport& report)
      : g_(g), readers_(g), report_(report), options_(options) {}

  void run() {
    std::vector<NodeId> softmaxes;
    for (const NodeId n : g_.node_ids()) {
      const Node& node = g_.node(n);
      if (!node.dead && node.graph == kMainGraph && node.domain == kNoName && op_of(g_, n) == "Softmax") {
        softmaxes.push_back(n);
      }
    }
    std::vector<std::pair<size_t, Match>> matches;
    std::vector<Fused> fused;
    AttentionSizes& sizes = sizes_;
    for (size_t i = 0; i < softmaxes.size(); ++i) {
      std::string why;
      if (auto m = match(softmaxes[i], why)) {
        if (matches.empty()) {
          sizes.batch = g_.shape(m->q)[0];
          sizes.query = g_.shape(m->q)[2];
        }
        sizes.past.push_back(g_.shape(m->past_k)[2]);
        sizes.past.push_back(g_.shape(m->past_v)[2]);
        matches.emplace_back(i, *m);
      } else {
        report_.line("attention " + std::to_string(i) + ": left plain: " + why);
      }
    }
    for (auto& [i, m] : matches) {
      if (!same_size(g_.shape(m.q)[0], sizes.batch) || !same_size(g_.shape(m.q)[2], sizes.query)) {
        report_.line("attention " + std::to_string(i) +
                     ": left plain: its batch or query length differs from the first");
        continue;
      }
      auto [it, fresh] = checks_.try_emplace(m.mask.id);
      if (fresh) it->second = check_causal_mask(g_, m.mask, m.mask_kind, sizes);
      const MaskCheck& check = it->second;
      if (!check.ok()) {
        report_.line("attention " + std::to_string(i) + ": left plain: " + check.failure);
        continue;
      }
      std::string rotary;
      fuse(m, check, rotary);
      fused.push_back({i, m.past_k, m.past_v, m.present_k, m.present_v, check.padding});
      report_.count("GroupQueryAttention");
      std::string line = "attention " + std::to_string(i) + ": GroupQueryAttention (num_heads " +
                         std::to_string(m.num_heads) + ", kv_num_heads " + std::to_string(m.kv_num_heads);
      if (check.window > 0) line += ", window " + std::to_string(check.window);
      if (m.softcap != 0) line += ", softcap";
      report_.line(line + ")" + rotary);
    }
    if (options_.share_cache && !fused.empty()) share(fused);
  }

 private:
  // The scores' scale, and softcap, down to MatMul(q, kT); false when `v` is not that.
  bool match_scores(Value v, Match& m, NodeId& matmul, std::string& why) const {
    // softcap * tanh(x / softcap), on the scaled scores (GroupQueryAttention's order).
    if (const NodeId mul = producer_of(g_, v, "Mul"); mul != kNoNode) {
      for (int side = 0; side < 2; ++side) {
        const auto cap = scalar_constant(g_, g_.inputs(mul)[1 - side]);
        const NodeId tanh = producer_of(g_, g_.inputs(mul)[side], "Tanh");
        if (!cap || tanh == kNoNode) continue;
        const NodeId div = producer_of(g_, g_.inputs(tanh)[0], "Div");
        if (div == kNoNode || scalar_constant(g_, g_.inputs(div)[1]) != cap) continue;
        m.softcap = *cap;
        v = g_.inputs(div)[0];
        break;
      }
    }
    for (;;) {
      if (const NodeId mul = producer_of(g_, v, "Mul"); mul != kNoNode) {
        const auto ins = g_.inputs(mul);
        if (const auto c = scalar_constant(g_, ins[1])) {
          m.scale *= *c;
          v = ins[0];
          continue;
        }
        if (const auto c = scalar_constant(g_, ins[0])) {
          m.scale *= *c;
          v = ins[1];
          continue;
        }
      }
      if (const NodeId div = producer_of(g_, v, "Div"); div != kNoNode) {
        if (const auto c = scalar_constant(g_, g_.inputs(div)[1]); c && *c != 0) {
          m.scale /= *c;
          v = g_.inputs(div)[0];
          continue;
        }
      }
      break;
    }
    matmul = producer_of(g_, v, "MatMul");
    if (matmul == kNoNode) {
      why = "the scores are not MatMul(q, k^T) times a constant";
      return false;
    }
    return true;
  }

  // The KV cache behind a key or value operand: optional grouped-head repetition of
  // Concat(past, new, axis=2) with a graph input as past.
  bool match_cache(Value operand, Value& past, Value& fresh, Value& present, int64_t& heads, std::string& why) const {
    Value v = operand;
    if (const NodeId reshape = producer_of(g_, v, "Reshape"); reshape != kNoNode) {
      const NodeId expand = producer_of(g_, g_.inputs(reshape)[0], "Expand");
      const NodeId unsq = expand == kNoNode ? kNoNode : producer_of(g_, g_.inputs(expand)[0], "Unsqueeze");
      if (unsq == kNoNode || int_constant(g_, g_.inputs(unsq)[1]) != std::vector<int64_t>{2}) {
        why = "the keys or values are reshaped other than by repeating heads";
        return false;
      }
      // [B, Nkv, 1, T, H] expanded to [B, Nkv, rep, T, H] only, then [B, Nkv * rep, T, H].
      const auto in = g_.shape(g_.inputs(expand)[0]), ex = g_.shape(g_.outputs(expand)[0]),
                 out = g_.shape(g_.outputs(reshape)[0]);
      if (in.size() != 5 || ex.size() != 5 || out.size() != 4 || !ex[2].is_static() || !in[1].is_static() ||
          !out[1].is_static() || out[1].value != in[1].value * ex[2].value || !same_size(out[2], in[3]) ||
          !same_size(out[3], in[4])) {
        why = "the heads are repeated in a layout other than repeat_kv's";
        return false;
      }
      for (const size_t d : {0, 1, 3, 4}) {
        if (!same_size(in[d], ex[d])) {
          why = "the heads are repeated in a layout other than repeat_kv's";
          return false;
        }
      }
      v = g_.inputs(unsq)[0];
    }
    const NodeId concat = producer_of(g_, v, "Concat");
    const Attr* axis = concat == kNoNode ? nullptr : g_.attr(concat, "axis", Attr::Kind::Int);
    if (axis == nullptr || (axis->as_int() != 2 && axis->as_int() != -2) || g_.inputs(concat).size() != 2) {
      why = "no KV cache: the keys and values are not Concat(past, new) on the sequence axis";
      return false;
    }
    past = g_.inputs(concat)[0];
    fresh = g_.inputs(concat)[1];
    present = v;
    if (g_.info(past).producer != kNoNode || g_.is_initializer(past)) {
      why = "the past keys and values are not graph inputs";
      return false;
    }
    heads = static_dim(g_, present, 1);
    return true;
  }

  std::optional<Match> match(NodeId softmax, std::string& why) const {
    Match m;
    m.softmax = softmax;
    const Value x = g_.inputs(softmax)[0];
    const Attr* axis = g_.attr(softmax, "axis", Attr::Kind::Int);
    // (The scores are [B, N, S, T] when q is [B, N, S, H], which is checked below.)
    if (axis == nullptr || (axis->as_int() != -1 && !(axis->as_int() == 3 && g_.info(x).rank == 4))) {
      why = "the Softmax is not over the last axis";
      return std::nullopt;
    }
    NodeId scores_mm = kNoNode;
    if (const NodeId where = producer_of(g_, x, "Where"); where != kNoNode) {
      const auto ins = g_.inputs(where);
      const auto fill = scalar_constant(g_, ins[2]);
      if (!fill || !(*fill <= -1e30)) {
        why = "the masked scores are filled with a value other than -inf";
        return std::nullopt;
      }
      m.mask = ins[0];
      m.mask_kind = MaskKind::Boolean;
      if (!match_scores(ins[1], m, scores_mm, why)) return std::nullopt;
    } else if (const NodeId add = producer_of(g_, x, "Add"); add != kNoNode) {
      // The scores are the operand that leads to MatMul(q, kT); the other is the mask.
      const auto ins = g_.inputs(add);
      for (int side = 0; side < 2 && scores_mm == kNoNode; ++side) {
        Match trial = m;
        std::string ignored;
        if (match_scores(ins[side], trial, scores_mm, ignored)) {
          m = trial;
          m.mask = ins[1 - side];
          m.mask_kind = MaskKind::Additive;
        }
      }
      if (scores_mm == kNoNode) {
        why = "the scores are not MatMul(q, k^T) times a constant";
        return std::nullopt;
      }
    } else {
      why = "the scores are not masked (Where or Add before the Softmax)";
      return std::nullopt;
    }
    m.q = g_.inputs(scores_mm)[0];
    const NodeId kt = producer_of(g_, g_.inputs(scores_mm)[1], "Transpose");
    if (kt == kNoNode || !has_perm(g_, kt, {0, 1, 3, 2})) {
      why = "the keys are not transposed by Transpose(perm=[0,1,3,2])";
      return std::nullopt;
    }
    int64_t kv_heads_k = 0, kv_heads_v = 0;
    if (!match_cache(g_.inputs(kt)[0], m.past_k, m.k, m.present_k, kv_heads_k, why)) return std::nullopt;

    // The probabilities, and the fully-masked-row guard that may follow them.
    Value probs = g_.outputs(softmax)[0];
    const auto readers = readers_.of(probs);
    if (readers.size() == 1 && op_of(g_, readers[0]) == "Where" && g_.inputs(readers[0])[2] == probs) {
      const NodeId guard = readers[0];
      const NodeId eq = producer_of(g_, g_.inputs(guard)[0], "Equal");
      const NodeId max = eq == kNoNode ? kNoNode : producer_of(g_, g_.inputs(eq)[0], "ReduceMax");
      const auto zero = scalar_constant(g_, g_.inputs(guard)[1]);
      const auto inf = eq == kNoNode ? std::nullopt : scalar_constant(g_, g_.inputs(eq)[1]);
      if (max == kNoNode || g_.inputs(max)[0] != x || zero != 0.0 || !inf || !std::isinf(*inf)) {
        why = "the probabilities go through a Where that is not the fully-masked-row guard";
        return std::nullopt;
      }
      probs = g_.outputs(guard)[0];
    }
    const auto prob_readers = readers_.of(probs);
    if (prob_readers.size() != 1 || readers_.external(probs) || op_of(g_, prob_readers[0]) != "MatMul" ||
        g_.inputs(prob_readers[0])[0] != probs) {
      why = "the probabilities are read other than by one MatMul with the values";
      return std::nullopt;
    }
    m.out_node = prob_readers[0];
    m.out = g_.outputs(m.out_node)[0];
    if (!match_cache(g_.inputs(m.out_node)[1], m.past_v, m.v, m.present_v, kv_heads_v, why)) return std::nullopt;

    if (!g_.info(m.mask).has_shape || g_.info(m.mask).rank != 4) {
      why = "the mask is not of a known 4-d shape";
      return std::nullopt;
    }
    const ScalarType t = g_.info(m.q).dtype;
    if (t != ScalarType::Float && t != ScalarType::Half && t != ScalarType::BFloat16) {
      why = std::string("the attention is in ") + dtype_name(t);
      return std::nullopt;
    }
    m.num_heads = static_dim(g_, m.q, 1);
    m.head_size = static_dim(g_, m.q, 3);
    m.kv_num_heads = kv_heads_k;
    if (g_.info(m.q).rank != 4 || g_.info(m.k).rank != 4 || g_.info(m.v).rank != 4 || m.num_heads <= 0 ||
        m.head_size <= 0 || kv_heads_k <= 0 || kv_heads_v != kv_heads_k || m.num_heads % kv_heads_k != 0 ||
        static_dim(g_, m.k, 3) != m.head_size || static_dim(g_, m.v, 3) != m.head_size) {
      why = "the heads of q, k and v do not group (static [B, N, S, H] with equal H and N_q a multiple of N_kv)";
      return std::nullopt;
    }
    return m;
  }

  Value new_value(ScalarType t, std::vector<Dim> dims) {
    const Value v = g_.add_value(t);
    g_.set_shape(v, dims);
    return v;
  }

  template <typename T>
  Value constant(ScalarType t, std::vector<T> values, bool scalar) {
    auto bytes = std::make_shared<std::vector<T>>(std::move(values));
    std::vector<Dim> dims;
    if (!scalar) dims.push_back(Dim{static_cast<int64_t>(bytes->size()), kNoName});
    const void* data = bytes->data();
    const size_t nbytes = bytes->size() * sizeof(T);
    return g_.add_initializer("", t, dims, data, nbytes, std::move(bytes));
  }

  // A new node's output, of dtype `t` and shape `dims`.
  Value node(std::string_view op, const Inputs& inputs, ScalarType t, std::vector<Dim> dims, const Attrs& attrs = {},
             std::string_view domain = "") {
    const NodeId n = g_.add_node(op, domain, inputs, 1, attrs);
    const Value out = g_.outputs(n)[0];
    g_.set_dtype(out, t);
    g_.set_shape(out, dims);
    return out;
  }

  // `x` [B, N, S, H] as GroupQueryAttention reads it, [B, S, N * H]: the projection it was
  // reshaped and transposed from when that is in the graph, else transposed back.
  Value to_bsd(Value x, int64_t heads, int64_t head_size) {
    const auto d = g_.shape(x);
    const Dim hidden{heads * head_size, kNoName};
    if (const NodeId tr = producer_of(g_, x, "Transpose"); tr != kNoNode && has_perm(g_, tr, {0, 2, 1, 3})) {
      const Value bsnh = g_.inputs(tr)[0];
      const auto s = g_.shape(bsnh);
      if (const NodeId rs = producer_of(g_, bsnh, "Reshape"); rs != kNoNode) {
        const Value flat = g_.inputs(rs)[0];
        const auto f = g_.shape(flat);
        if (f.size() == 3 && same_size(f[0], s[0]) && same_size(f[1], s[1]) && same_size(f[2], hidden)) return flat;
      }
      return node("Reshape", {bsnh, flat_shape()}, g_.info(x).dtype, {s[0], s[1], hidden});
    }
    const Value bsnh =
        node("Transpose", {x}, g_.info(x).dtype, {d[0], d[2], d[1], d[3]}, {Attr::ints("perm", {0, 2, 1, 3})});
    return node("Reshape", {bsnh, flat_shape()}, g_.info(x).dtype, {d[0], d[2], hidden});
  }

  // `x` [B, N, S, H] as GroupQueryAttention reads it ([B, S, N * H]), through
  // com.microsoft RotaryEmbedding when `x` is rotary embedding that it computes exactly.
  // `line` gets ", rotary N positions" when q and k are fused, or why one was left in the graph.
  Value rotary_or_bsd(Value x, int64_t heads, int64_t head_size, std::string& line) {
    if (options_.rotary_positions <= 0) return to_bsd(x, heads, head_size);
    const auto r = match_rotary(x, head_size);
    if (!r) return to_bsd(x, heads, head_size);
    const RotaryTables& t = tables(r->cos, r->sin, head_size, g_.info(x).dtype);
    if (!t.failure.empty()) {
      line = "; rotary left in the graph: " + t.failure;
      return to_bsd(x, heads, head_size);
    }
    if (line.empty()) line = ", rotary " + std::to_string(options_.rotary_positions) + " positions";
    const Value flat = to_bsd(r->x, heads, head_size);
    const auto d = g_.shape(flat);
    return node("RotaryEmbedding", {flat, t.positions, t.cos, t.sin}, g_.info(x).dtype, {d.begin(), d.end()},
                {Attr::i("num_heads", heads)}, kMicrosoftDomain);
  }

  // A half of the last axis of `x` [B, N, S, H]: x[..., :H/2] or x[..., H/2:].
  bool is_half(NodeId slice, Value x, int64_t head, bool upper) const {
    const auto ins = g_.inputs(slice);
    if (ins.size() < 4 || ins[0] != x) return false;
    const auto starts = int_constant(g_, ins[1]), ends = int_constant(g_, ins[2]), axes = int_constant(g_, ins[3]);
    if (!starts || !ends || !axes || starts->size() != 1 || ends->size() != 1 || axes->size() != 1) return false;
    if ((*axes)[0] != -1 && (*axes)[0] != 3) return false;
    if (ins.size() > 4 && ins[4].valid() && int_constant(g_, ins[4]) != std::vector<int64_t>{1}) return false;
    return upper ? (*starts)[0] == head / 2 && (*ends)[0] >= head : (*starts)[0] == 0 && (*ends)[0] == head / 2;
  }

  // x * cos + rotate_half(x) * sin, rotate_half(x) = Concat(-x[..., H/2:], x[..., :H/2]) on the
  // last axis (transformers' rotate_half), with cos and sin [B or 1, 1, S, H].
  struct Rotary {
    Value x, cos, sin;
  };
  std::optional<Rotary> match_rotary(Value v, int64_t head) const {
    const NodeId add = producer_of(g_, v, "Add");
    if (add == kNoNode || head % 2 != 0) return std::nullopt;
    const auto sum = g_.inputs(add);
    for (int side = 0; side < 2; ++side) {
      const NodeId direct = producer_of(g_, sum[side], "Mul"), rotated = producer_of(g_, sum[1 - side], "Mul");
      if (direct == kNoNode || rotated == kNoNode) continue;
      for (int i = 0; i < 2; ++i) {
        for (int j = 0; j < 2; ++j) {
          const Value x = g_.inputs(direct)[i], cos = g_.inputs(direct)[1 - i];
          const Value half = g_.inputs(rotated)[j], sin = g_.inputs(rotated)[1 - j];
          const NodeId cat = producer_of(g_, half, "Concat");
          const Attr* axis = cat == kNoNode ? nullptr : g_.attr(cat, "axis", Attr::Kind::Int);
          if (axis == nullptr || (axis->as_int() != -1 && axis->as_int() != 3) || g_.inputs(cat).size() != 2) continue;
          const NodeId neg = producer_of(g_, g_.inputs(cat)[0], "Neg");
          const NodeId lower = producer_of(g_, g_.inputs(cat)[1], "Slice");
          const NodeId upper = neg == kNoNode ? kNoNode : producer_of(g_, g_.inputs(neg)[0], "Slice");
          if (upper == kNoNode || lower == kNoNode || !is_half(upper, x, head, true) || !is_half(lower, x, head, false))
            continue;
          const auto xd = g_.shape(x), cd = g_.shape(cos), sd = g_.shape(sin);
          const auto table_shape = [&](std::span<const Dim> t) {
            return t.size() == 4 && t[1].is_static() && t[1].value == 1 && same_size(t[2], xd[2]) && t[3].is_static() &&
                   t[3].value == head;
          };
          if (xd.size() != 4 || !table_shape(cd) || !table_shape(sd)) continue;
          return Rotary{x, cos, sin};
        }
      }
    }
    return std::nullopt;
  }

  // RotaryEmbedding's inputs for the graph's `cos` and `sin`: the position input they are
  // computed from, and [positions, H/2] tables of their values at positions 0, 1, ..., evaluated
  // from the graph (so any frequencies, scaling and attention factor the model computes are
  // what the tables hold). Established, not assumed: the two must read one int64 input by value
  // and nothing else, hold each value twice (rotate_half's layout, not interleaved pairs), and
  // depend on each position alone (a second probe, positions out of order, reads the tables).
  struct RotaryTables {
    Value positions, cos, sin;
    std::string failure;
  };
  const RotaryTables& tables(Value cos, Value sin, int64_t head, ScalarType t) {
    auto [it, fresh] = tables_.try_emplace(cos.id);
    RotaryTables& out = it->second;
    if (!fresh) return out;
    const ConeInputs from_cos = cone_inputs(g_, cos), from_sin = cone_inputs(g_, sin);
    if (from_cos.by_value.size() != 1 || from_sin.by_value != from_cos.by_value) {
      out.failure = "cos and sin are not computed from one position input";
      return out;
    }
    const Value positions = from_cos.by_value[0];
    const auto pd = g_.shape(positions);
    if (g_.info(positions).dtype != ScalarType::Long || pd.size() != 2 || pd[0].is_static() || pd[1].is_static()) {
      out.failure = "the position input is not int64 [batch, sequence] of dynamic sizes";
      return out;
    }
    const int64_t length = options_.rotary_positions, half = head / 2;
    const auto es = static_cast<size_t>(element_size(t));
    const auto probe = [&](int64_t rows, int64_t columns, const std::vector<int64_t>& at, const ConeTensor*& c,
                           const ConeTensor*& s, std::unique_ptr<ConeEvaluator>& eval) {
      ConeTensor input{ScalarType::Long, {rows, columns}, {}, false};
      input.bytes.resize(at.size() * sizeof(int64_t));
      std::memcpy(input.bytes.data(), at.data(), input.bytes.size());
      eval = std::make_unique<ConeEvaluator>(
          g_, std::unordered_map<StrId, int64_t>{{pd[0].symbol, rows}, {pd[1].symbol, columns}},
          std::unordered_map<uint32_t, ConeTensor>{{positions.id, std::move(input)}});
      c = eval->eval(cos);
      s = c == nullptr ? nullptr : eval->eval(sin);
      if (s == nullptr) {
        out.failure = "cos and sin cannot be evaluated: " + eval->failure();
        return false;
      }
      const auto count = static_cast<size_t>(rows * columns * head);
      if (c->dtype != t || s->dtype != t || c->bytes.size() != count * es || s->bytes.size() != count * es) {
        out.failure = "cos and sin are not one [H] row per position in the attention's dtype";
        return false;
      }
      return true;
    };
    // Positions 0..length-1: each row must be its first half twice.
    std::vector<int64_t> all(static_cast<size_t>(length));
    for (int64_t p = 0; p < length; ++p) all[static_cast<size_t>(p)] = p;
    const ConeTensor *c = nullptr, *s = nullptr;
    std::unique_ptr<ConeEvaluator> eval;
    if (!probe(1, length, all, c, s, eval)) return out;
    const size_t row = static_cast<size_t>(head) * es, part = static_cast<size_t>(half) * es;
    auto cos_table = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(length) * part);
    auto sin_table = std::make_shared<std::vector<uint8_t>>(static_cast<size_t>(length) * part);
    for (size_t p = 0; p < static_cast<size_t>(length); ++p) {
      for (const auto& [from, to] : {std::pair{c, cos_table.get()}, std::pair{s, sin_table.get()}}) {
        const uint8_t* r = from->bytes.data() + p * row;
        if (std::memcmp(r, r + part, part) != 0) {
          out.failure = "cos and sin do not repeat their halves (an interleaved or partial rotary)";
          return out;
        }
        std::memcpy(to->data() + p * part, r, part);
      }
    }
    // Positions out of order in a batch, and a short prefix alone (a model that picks its
    // frequencies by the longest position, as longrope and dynamic NTK scaling do, computes
    // other values there): each row must be the table's row of its position.
    struct Check {
      int64_t rows, columns;
      std::vector<int64_t> at;
    };
    const Check checks[] = {{2, 3, {3, 0, length - 1, length / 2, 1, 1}}, {1, 3, {0, 1, 2}}};
    for (const Check& check : checks) {
      const ConeTensor *c2 = nullptr, *s2 = nullptr;
      std::unique_ptr<ConeEvaluator> eval2;
      if (!probe(check.rows, check.columns, check.at, c2, s2, eval2)) return out;
      for (size_t r = 0; r < check.at.size(); ++r) {
        const size_t at = static_cast<size_t>(std::min(check.at[r], length - 1)) * row;
        if (std::memcmp(c2->bytes.data() + r * row, c->bytes.data() + at, row) != 0 ||
            std::memcmp(s2->bytes.data() + r * row, s->bytes.data() + at, row) != 0) {
          out.failure = "cos and sin at a position depend on more than that position";
          return out;
        }
      }
    }
    const std::vector<Dim> dims{Dim{length, kNoName}, Dim{half, kNoName}};
    out.positions = positions;
    out.cos = g_.add_initializer("", t, dims, cos_table->data(), cos_table->size(), cos_table);
    out.sin = g_.add_initializer("", t, dims, sin_table->data(), sin_table->size(), sin_table);
    return out;
  }

  Value flat_shape() {
    if (!flat_shape_.valid()) flat_shape_ = constant<int64_t>(ScalarType::Long, {0, 0, -1}, false);
    return flat_shape_;
  }

  // GroupQueryAttention's sequence inputs, from the first query [B, S, D] and the mask: every
  // key counted (the mask hides the padding), every query token new.
  struct Lengths {
    Value seqlens_k, total, query_seqlens, bias;
  };

  const Lengths& lengths(const Match& m, Value q3) {
    auto [it, fresh] = lengths_.try_emplace(m.mask.id);
    Lengths& l = it->second;
    if (!fresh) return l;
    const auto qd = g_.shape(q3);
    if (!batch_.valid()) {
      const Value shape = node("Shape", {q3}, ScalarType::Long, {Dim{3, kNoName}});
      batch_ = node("Gather", {shape, constant<int64_t>(ScalarType::Long, {0}, false)}, ScalarType::Long,
                    {Dim{1, kNoName}}, {Attr::i("axis", 0)});
      const Value seq = node("Gather", {shape, constant<int64_t>(ScalarType::Long, {1}, false)}, ScalarType::Long,
                             {Dim{1, kNoName}}, {Attr::i("axis", 0)});
      const Value seq32 =
          node("Cast", {seq}, ScalarType::Int, {Dim{1, kNoName}}, {Attr::i("to", onnx_dtype(ScalarType::Int))});
      query_seqlens_ = node("Expand", {seq32, batch_}, ScalarType::Int, {qd[0]});
    }
    l.query_seqlens = query_seqlens_;
    const Value mask_shape = node("Shape", {m.mask}, ScalarType::Long, {Dim{4, kNoName}});
    const Value total64 = node("Gather", {mask_shape, constant<int64_t>(ScalarType::Long, {3}, true)}, ScalarType::Long,
                               std::vector<Dim>{}, {Attr::i("axis", 0)});
    l.total =
        node("Cast", {total64}, ScalarType::Int, std::vector<Dim>{}, {Attr::i("to", onnx_dtype(ScalarType::Int))});
    const Value last =
        node("Sub", {l.total, constant<int32_t>(ScalarType::Int, {1}, true)}, ScalarType::Int, std::vector<Dim>{});
    l.seqlens_k = node("Expand", {last, batch_}, ScalarType::Int, {qd[0]});
    const ScalarType t = g_.info(m.q).dtype;
    if (m.mask_kind == MaskKind::Additive) {
      l.bias = m.mask;
    } else {
      // The lowest finite value, not -inf: a fully masked (padding) row stays finite.
      std::vector<uint8_t> zero(static_cast<size_t>(element_size(t))), lowest(zero.size());
      store_double(t, zero.data(), 0.0);
      store_double(t, lowest.data(), t == ScalarType::Half ? -65504.0 : -std::numeric_limits<float>::max());
      const auto md = g_.shape(m.mask);  // checked: [B or 1, 1, S, T]
      l.bias = node("Where", {m.mask, constant<uint8_t>(t, zero, true), constant<uint8_t>(t, lowest, true)}, t,
                    std::vector<Dim>(md.begin(), md.end()));
    }
    return l;
  }

  void fuse(const Match& m, const MaskCheck& check, std::string& rotary_line) {
    const Value q3 = rotary_or_bsd(m.q, m.num_heads, m.head_size, rotary_line);
    const Value k3 = rotary_or_bsd(m.k, m.kv_num_heads, m.head_size, rotary_line);
    const Value v3 = to_bsd(m.v, m.kv_num_heads, m.head_size);
    const Lengths l = lengths(m, q3);

    // The output in [B, S, N * H]: the value the graph reshapes it to when that is what follows
    // (the MatMul's output through a Transpose(0,2,1,3) and Reshapes that only regroup), else a
    // new value turned back into the MatMul's [B, N, S, H].
    const auto od = g_.shape(m.out);
    const Dim hidden{m.num_heads * m.head_size, kNoName};
    Value out3;
    NodeId replaced = m.out_node;
    Value v = m.out;
    bool transposed = false;
    for (;;) {
      const auto r = readers_.of(v);
      if (r.size() != 1 || readers_.external(v)) break;
      const std::string_view op = op_of(g_, r[0]);
      const Value next = g_.outputs(r[0])[0];
      const auto nd = g_.shape(next);
      if (op == "Transpose" && !transposed && has_perm(g_, r[0], {0, 2, 1, 3})) {
        transposed = true;
      } else if (op != "Reshape" || g_.inputs(r[0])[0] != v) {
        break;
      }
      if (op == "Reshape" && transposed && nd.size() == 3 && same_size(nd[0], od[0]) && same_size(nd[1], od[2]) &&
          same_size(nd[2], hidden)) {
        out3 = next;
        replaced = r[0];
        break;
      }
      // A Reshape to the same shape changes nothing on the way.
      const auto vd = g_.shape(v);
      if (op == "Reshape" && !(nd.size() == vd.size() && std::equal(nd.begin(), nd.end(), vd.begin(), same_size)))
        break;
      v = next;
    }
    const bool direct = out3.valid();
    if (!direct) out3 = new_value(g_.info(m.out).dtype, {od[0], od[2], hidden});

    Attrs attrs{Attr::i("num_heads", m.num_heads), Attr::i("kv_num_heads", m.kv_num_heads), Attr::f("scale", m.scale)};
    if (m.softcap != 0) attrs.push_back(Attr::f("softcap", m.softcap));
    // local_window_size counts the keys a query sees, its own included (measured against the
    // plain graph: window - 1 hides one key the mask lets through).
    if (check.window > 0) attrs.push_back(Attr::i("local_window_size", check.window));
    const std::vector<Value> inputs{q3,     k3, v3, m.past_k, m.past_v, l.seqlens_k, l.total,        {}, {}, {},
                                    l.bias, {}, {}, {},       {},       {},          l.query_seqlens};
    const std::vector<Value> outputs{out3, m.present_k, m.present_v};
    g_.kill(g_.info(m.present_k).producer);
    g_.kill(g_.info(m.present_v).producer);
    g_.kill(replaced);
    g_.add_fused("GroupQueryAttention", kMicrosoftDomain, inputs, outputs, attrs);
    if (!direct) {
      const Value bsnh =
          node("Reshape", {out3, constant<int64_t>(ScalarType::Long, {0, 0, m.num_heads, m.head_size}, false)},
               g_.info(m.out).dtype, {od[0], od[2], od[1], od[3]});
      const Value perm_out[] = {m.out};
      const Value perm_in[] = {bsnh};
      g_.add_fused("Transpose", "", perm_in, perm_out, {Attr::ints("perm", {0, 2, 1, 3})});
    }
  }

  // share_cache: each fused attention whose past inputs only it and Shape nodes read, and whose
  // presents only the graph's outputs, is counted as sharing; those Shape nodes then give the
  // logical shape.
  void share(const std::vector<Fused>& fused) {
    // The nodes the fusion replaced still read the caches until they are found dead.
    sort_nodes(g_);
    remove_dead_nodes(g_);
    const Readers readers(g_);
    const Value query = query_length();
    for (const Fused& f : fused) {
      std::string why;
      if (!query.valid()) why = "no graph input has the query length as a dimension";
      for (const Value past : {f.past_k, f.past_v}) {
        if (readers.external(past)) why = "its past input is also an output or read by a subgraph";
        for (const NodeId r : readers.of(past)) {
          const Node& node = g_.node(r);
          const bool gqa =
              g_.strings.str(node.domain) == kMicrosoftDomain && g_.strings.str(node.op_type) == "GroupQueryAttention";
          if (!gqa && op_of(g_, r) != "Shape") why = "its past input is also read by a " + std::string(op_of(g_, r));
        }
      }
      for (const Value present : {f.present_k, f.present_v}) {
        if (!readers.of(present).empty())
          why = "its present is also read by a " + std::string(op_of(g_, readers.of(present)[0]));
      }
      if (!why.empty()) {
        report_.line("attention " + std::to_string(f.index) + ": KV cache not shareable: " + why);
        continue;
      }
      for (const Value past : {f.past_k, f.past_v}) {
        for (const NodeId r : readers.of(past)) {
          if (op_of(g_, r) == "Shape") logical_shape(r, past, f.padding, query);
        }
      }
      // The present is the whole buffer when shared: its length is not the past's plus the query's.
      for (const Value present : {f.present_k, f.present_v}) {
        std::vector<Dim> dims(g_.shape(present).begin(), g_.shape(present).end());
        dims[2] = Dim{-1, g_.strings.intern("total_sequence_length")};
        g_.set_shape(present, dims);
      }
      report_.count("shared KV cache");
    }
  }

  // The query length as [1], read from a graph input that has it as a dimension (input_ids),
  // or a constant when the graph fixes it. Not from q: the graph may compute q's shape from a
  // past input's (torch.export reads a dim shared by several inputs from any one of them), and
  // that Shape is what logical_shape replaces.
  Value query_length() {
    const Dim& s = sizes_.query;
    if (s.is_static()) return constant<int64_t>(ScalarType::Long, {s.value}, false);
    for (const Value in : g_.graph_inputs()) {
      const auto dims = g_.shape(in);
      for (size_t d = 0; d < dims.size(); ++d) {
        if (dims[d].symbol != s.symbol || g_.info(in).rank_varies) continue;
        return node("Shape", {in}, ScalarType::Long, {Dim{1, kNoName}},
                    {Attr::i("start", static_cast<int64_t>(d)), Attr::i("end", static_cast<int64_t>(d) + 1)});
      }
    }
    return {};
  }

  // The Shape node `n` of the past input `past` as the shape of the past it stands for: dim 2 is
  // the padding mask's width minus the query length (both read from graph inputs only, so no
  // cycle can pass through `n`).
  void logical_shape(NodeId n, Value past, Value padding, Value query) {
    auto [it, fresh] = past_length_.try_emplace(padding.id);
    if (fresh) {
      const Value width =
          node("Shape", {padding}, ScalarType::Long, {Dim{1, kNoName}}, {Attr::i("start", 1), Attr::i("end", 2)});
      it->second = node("Sub", {width, query}, ScalarType::Long, {Dim{1, kNoName}});
    }
    const auto [begin, end] = shape_range(g_, n, static_cast<int64_t>(g_.info(past).rank));
    if (begin > 2 || end <= 2) return;  // the past's length is not among the dims it reads
    // The runs of dims before and after dim 2, read from the buffer, and the length between them.
    std::vector<Value> parts;
    const auto run = [&](int64_t b, int64_t e) {
      if (b < e) {
        parts.push_back(
            node("Shape", {past}, ScalarType::Long, {Dim{e - b, kNoName}}, {Attr::i("start", b), Attr::i("end", e)}));
      }
    };
    run(begin, 2);
    parts.push_back(it->second);
    run(3, end);
    const Value out[] = {g_.outputs(n)[0]};
    g_.kill(n);
    g_.add_fused("Concat", "", parts, out, {Attr::i("axis", 0)});
  }

  Graph& g_;
  Readers readers_;
  RewriteReport& report_;
  const AttentionOptions& options_;
  std::unordered_map<uint32_t, RotaryTables> tables_;  // by cos value
  std::unordered_map<uint32_t, MaskCheck> checks_;
  std::unordered_map<uint32_t, Lengths> lengths_;
  std::unordered_map<uint32_t, Value> past_length_;  // by padding input
  AttentionSizes sizes_;
  Value flat_shape_, batch_, query_seqlens_;
};

}  // namespace

void fuse_attention(Graph& g, const AttentionOptions& options, RewriteReport& report) {
  AttentionFusion(g, options, report).run();
}

}  // namespace fastonnx
