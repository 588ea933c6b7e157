#include "attention_mask_probe.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "fastonnx/fold.h"
#include "fastonnx/numeric.h"
#include "fastonnx/rewrite.h"

namespace fastonnx {

namespace {

// One probe: batch, past and query lengths, and how many keys each batch row pads (on the left,
// as onnxruntime-genai pads a batch, or on the right when `right`).
struct Probe {
  int64_t batch, past, query;
  std::vector<int64_t> pads;
  bool right = false;
};

// Left padding (what generation feeds), right padding, one row, empty and filled past, prompts,
// single-token and multi-token steps; the longest is 13 keys, for windows.
const std::vector<Probe>& probes() {
  static const std::vector<Probe> kProbes = {
      {2, 0, 5, {0, 2}}, {2, 3, 1, {1, 0}},       {2, 4, 4, {0, 3}}, {1, 0, 1, {0}},
      {2, 9, 4, {2, 0}}, {2, 2, 3, {0, 1}, true}, {1, 7, 6, {0}},
  };
  return kProbes;
}

// The probes at the sizes the graph fixes (a batch or a query length traced as static), each row
// keeping at least one token.
std::vector<Probe> probes_for(const AttentionSizes& sizes) {
  std::vector<Probe> out = probes();
  for (Probe& probe : out) {
    if (sizes.batch.is_static()) probe.batch = sizes.batch.value;
    if (sizes.query.is_static()) probe.query = sizes.query.value;
    probe.pads.resize(static_cast<size_t>(probe.batch), 0);
    for (int64_t& pads : probe.pads) pads = std::min(pads, probe.past + probe.query - 1);
  }
  return out;
}

bool is_token(const Probe& p, int64_t b, int64_t k) {
  const int64_t total = p.past + p.query;
  return p.right ? k < total - p.pads[b] : k >= p.pads[b];
}

// A value of the cone on one probe: its bytes, or only its shape (an input whose sizes alone the
// mask may read).
struct Tensor {
  ScalarType dtype = ScalarType::Undefined;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
  bool sized_only = false;
};

class ConeEvaluator {
 public:
  ConeEvaluator(const Graph& g, const Probe& probe, const AttentionSizes& sizes, Value padding)
      : g_(g), probe_(probe), padding_(padding) {
    bind(sizes.batch, probe.batch);
    bind(sizes.query, probe.query);
    for (const Dim& d : sizes.past) bind(d, probe.past);
  }

  // The value of `v`, or nullopt with failure() saying why.
  const Tensor* eval(Value v) {
    if (const auto it = done_.find(v.id); it != done_.end()) return &it->second;
    std::optional<Tensor> t = compute(v);
    if (!t) return nullptr;
    return &done_.emplace(v.id, std::move(*t)).first->second;
  }
  const std::string& failure() const { return failure_; }

 private:
  void bind(const Dim& d, int64_t size) {
    if (d.symbol != kNoName) symbols_[d.symbol] = size;
  }

  std::optional<std::vector<int64_t>> sizes_of(Value v) const {
    if (!g_.info(v).has_shape || g_.info(v).rank_varies) return std::nullopt;
    std::vector<int64_t> out;
    for (const Dim& d : g_.shape(v)) {
      if (d.is_static()) {
        out.push_back(d.value);
      } else if (const auto it = symbols_.find(d.symbol); it != symbols_.end()) {
        out.push_back(it->second);
      } else {
        return std::nullopt;
      }
    }
    return out;
  }

  std::optional<Tensor> fail(std::string why) {
    if (failure_.empty()) failure_ = std::move(why);
    return std::nullopt;
  }

  std::optional<Tensor> compute(Value v) {
    if (const Initializer* init = g_.initializer(v)) {
      if (init->overridable || init->data == nullptr) return fail("it reads a weight");
      Tensor t{g_.info(v).dtype, *g_.static_shape(v), {}, false};
      const auto* p = static_cast<const uint8_t*>(init->data);
      t.bytes.assign(p, p + init->nbytes);
      return t;
    }
    const NodeId n = g_.info(v).producer;
    if (n == kNoNode) return graph_input(v);
    const Node& node = g_.node(n);
    if (node.graph != kMainGraph || node.domain != kNoName) return fail("it is computed by a subgraph or a fused op");
    const std::string_view op = op_of(g_, n);
    const auto ins = g_.inputs(n);
    if (op == "Shape") {
      // The sizes of a value the probe determines, without computing the value itself.
      std::vector<int64_t> shape;
      if (const auto declared = sizes_of(ins[0])) {
        shape = *declared;
      } else {
        const Tensor* in = eval(ins[0]);
        if (in == nullptr) return std::nullopt;
        shape = in->shape;
      }
      const auto rank = static_cast<int64_t>(shape.size());
      const auto clamp = [&](int64_t i) { return std::clamp(i < 0 ? i + rank : i, int64_t{0}, rank); };
      const Attr* start = g_.attr(n, "start", Attr::Kind::Int);
      const Attr* end = g_.attr(n, "end", Attr::Kind::Int);
      const int64_t b = start ? clamp(start->as_int()) : 0, e = end ? clamp(end->as_int()) : rank;
      Tensor t{ScalarType::Long, {std::max<int64_t>(e - b, 0)}, {}, false};
      for (int64_t i = b; i < e; ++i) append(t.bytes, shape[i]);
      return t;
    }
    std::vector<std::optional<ConstView>> views;
    std::vector<ConstSource> sources;
    for (const Value in : ins) {
      if (!in.valid()) {
        views.emplace_back();
        sources.emplace_back();
        continue;
      }
      const Tensor* t = eval(in);
      if (t == nullptr) return std::nullopt;
      if (t->sized_only) return fail("it reads the values of input '" + std::string(g_.name(in)) + "'");
      views.push_back(ConstView{t->dtype, t->shape, t->bytes.data(), false});
      sources.push_back(ConstSource{t->bytes.data(), nullptr, nullptr});
    }
    const auto folded = fold(op, g_.attrs(n), views, sources);
    if (!folded) return fail("the constant folder does not evaluate its " + std::string(op));
    const auto outs = g_.outputs(n);
    std::optional<Tensor> result;
    for (size_t i = 0; i < folded->size() && i < outs.size(); ++i) {
      const Folded& f = (*folded)[i];
      if (f.computed) return fail("the constant folder defers its " + std::string(op));
      Tensor t{f.dtype, f.shape, f.alias_of >= 0 ? done_.at(ins[f.alias_of].id).bytes : f.bytes, false};
      if (outs[i] == v) {
        result = std::move(t);
      } else {
        done_.emplace(outs[i].id, std::move(t));
      }
    }
    if (!result) return fail("the constant folder does not evaluate its " + std::string(op));
    return result;
  }

  std::optional<Tensor> graph_input(Value v) {
    if (v != padding_) {
      const auto shape = sizes_of(v);
      if (!shape) return fail("it depends on the sizes of input '" + std::string(g_.name(v)) + "'");
      return Tensor{g_.info(v).dtype, *shape, {}, true};
    }
    // The padding mask: [batch, past + query], 1 where a key is a token.
    const int64_t total = probe_.past + probe_.query;
    Tensor t{g_.info(v).dtype, {probe_.batch, total}, {}, false};
    const auto es = static_cast<size_t>(element_size(t.dtype));
    t.bytes.resize(static_cast<size_t>(probe_.batch * total) * es);
    for (int64_t b = 0; b < probe_.batch; ++b) {
      for (int64_t k = 0; k < total; ++k) {
        store_double(t.dtype, t.bytes.data() + static_cast<size_t>(b * total + k) * es,
                     is_token(probe_, b, k) ? 1.0 : 0.0);
      }
    }
    return t;
  }

  static void append(std::vector<uint8_t>& bytes, int64_t v) {
    const auto* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(v));
  }

  const Graph& g_;
  const Probe& probe_;
  Value padding_;
  std::unordered_map<StrId, int64_t> symbols_;
  std::unordered_map<uint32_t, Tensor> done_;
  std::string failure_;
};

// The graph inputs the cone of `mask` reads: by value, or only through a Shape.
struct ConeInputs {
  std::vector<Value> by_value, by_size;
};

ConeInputs cone_inputs(const Graph& g, Value mask) {
  ConeInputs out;
  // Values reached as values, and reached only for their sizes.
  std::vector<bool> seen_value(g.num_values(), false), seen_size(g.num_values(), false);
  std::vector<std::pair<Value, bool>> stack{{mask, true}};
  while (!stack.empty()) {
    const auto [v, by_value] = stack.back();
    stack.pop_back();
    if (!v.valid() || g.is_initializer(v) || seen_value[v.id] || (!by_value && seen_size[v.id])) continue;
    (by_value ? seen_value : seen_size)[v.id] = true;
    const NodeId n = g.info(v).producer;
    if (n == kNoNode) {
      auto& list = by_value ? out.by_value : out.by_size;
      if (std::find(list.begin(), list.end(), v) == list.end()) list.push_back(v);
      continue;
    }
    const bool shape = op_of(g, n) == "Shape";
    for (const Value in : g.inputs(n)) stack.emplace_back(in, !shape);
  }
  return out;
}

}  // namespace

MaskCheck check_causal_mask(const Graph& g, Value mask, MaskKind kind, const AttentionSizes& sizes) {
  MaskCheck check;
  const ConeInputs inputs = cone_inputs(g, mask);
  if (inputs.by_value.size() != 1) {
    check.failure = inputs.by_value.empty() ? "the mask reads no padding mask input"
                                            : "the mask reads the values of more than one input";
    return check;
  }
  const Value padding = inputs.by_value[0];
  if (g.info(padding).rank != 2) {
    check.failure = "the mask reads input '" + std::string(g.name(padding)) + "', which is not [batch, keys]";
    return check;
  }
  // Per probe, what the mask allows; the window is the shortest distance it cuts that causality
  // and padding allow.
  std::vector<std::vector<uint8_t>> allowed;
  int64_t window = std::numeric_limits<int64_t>::max();
  const std::vector<Probe> sized = probes_for(sizes);
  for (const Probe& probe : sized) {
    ConeEvaluator eval(g, probe, sizes, padding);
    const Tensor* t = eval.eval(mask);
    if (t == nullptr) {
      check.failure = "the mask cannot be evaluated: " + eval.failure();
      return check;
    }
    const int64_t B = probe.batch, S = probe.query, T = probe.past + probe.query;
    const auto& d = t->shape;
    if (d.size() != 4 || (d[0] != 1 && d[0] != B) || d[1] != 1 || d[2] != S || d[3] != T) {
      check.failure = "the mask is not of shape [batch or 1, 1, query, past + query]";
      return check;
    }
    const auto es = static_cast<size_t>(element_size(t->dtype));
    std::vector<uint8_t> got(static_cast<size_t>(B * S * T));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t q = 0; q < S; ++q) {
        for (int64_t k = 0; k < T; ++k) {
          const int64_t at = ((d[0] == 1 ? 0 : b) * S + q) * T + k;
          const double x = load_double(t->dtype, t->bytes.data() + static_cast<size_t>(at) * es);
          bool attend = false;
          if (kind == MaskKind::Boolean) {
            attend = x != 0;
          } else if (x == 0) {
            attend = true;
          } else if (!(x <= -1e30)) {
            check.failure = "the additive mask holds a value other than 0 and -inf (a bias)";
            return check;
          }
          got[static_cast<size_t>((b * S + q) * T + k)] = attend;
          const bool token = is_token(probe, b, k);
          if (attend && (!token || k > probe.past + q)) {
            check.failure = "the mask lets a query see a padded or a later key";
            return check;
          }
          if (!attend && token && k <= probe.past + q) window = std::min(window, probe.past + q - k);
        }
      }
    }
    allowed.push_back(std::move(got));
  }
  if (window == 0) {
    check.failure = "the mask hides a query's own key";
    return check;
  }
  // Causal and padding with that window, exactly, on every probe.
  for (size_t i = 0; i < sized.size(); ++i) {
    const Probe& probe = sized[i];
    const int64_t S = probe.query, T = probe.past + probe.query;
    for (int64_t b = 0; b < probe.batch; ++b) {
      for (int64_t q = 0; q < S; ++q) {
        for (int64_t k = 0; k < T; ++k) {
          const bool expect = is_token(probe, b, k) && k <= probe.past + q && probe.past + q - k < window;
          if (allowed[i][static_cast<size_t>((b * S + q) * T + k)] != static_cast<uint8_t>(expect)) {
            check.failure = "the mask is not causal attention over the padded keys within one window";
            return check;
          }
        }
      }
    }
  }
  if (window != std::numeric_limits<int64_t>::max()) check.window = window;
  return check;
}

}  // namespace fastonnx
