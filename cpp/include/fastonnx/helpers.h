// Helpers that mapping specs may call by name (lowercase calls; their signatures, which codegen
// checks rules against, are in codegen/helpers.py).
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fastonnx/builder.h"

namespace fastonnx {

// ONNX pads list [begin..., end...] from torch's symmetric per-dimension padding.
std::vector<int64_t> helper_twice(Builder& b, const SymIntList& padding);
std::vector<int64_t> helper_twice(Builder& b, const std::vector<int64_t>& padding);
// Explicit ONNX pads for torch's padding="same"/"valid" of a convolution with `weight`. ONNX's
// auto_pad would say the same, but onnxruntime rejects SAME_* with dilation; torch puts the odd
// extra pad at the end.
std::vector<int64_t> helper_conv_pads(Builder& b, const std::string& padding, Value weight, const SymIntList& dilation);

// ConvTranspose: torch's output_padding extends the output at the end, which is the same as
// cropping less there; only what the end padding cannot absorb stays as output_padding.
std::vector<int64_t> helper_transpose_pads(Builder& b, const SymIntList& padding, const SymIntList& output_padding);
std::vector<int64_t> helper_transpose_output_padding(Builder& b, const SymIntList& padding,
                                                     const SymIntList& output_padding);

// -- Tensor helpers: each builds the nodes of a conversion, as a hand-written body would. Op
// names are ONNX ops; `axes` are ONNX axes, every axis when absent.

// common.cpp.
// Builder::cast: a Cast unless `x` has the dtype already, complex (real, imaginary) pairs kept.
Value cast(Builder& b, Value x, ScalarType dtype);
// Builder::dtype and scalar: a tensor's dtype, and a 0-d tensor of `value` in `dtype`.
ScalarType dtype_of(Builder& b, Value x);
Value scalar(Builder& b, const Scalar& value, ScalarType dtype);
// Builder::as_real and as_complex: a complex tensor as its (real, imaginary) pairs and back.
Value as_real(Builder& b, Value x);
Value as_complex(Builder& b, Value x);
// The dtype torch.export recorded for output `index` of the node.
ScalarType output_dtype(Builder& b, int64_t index);
// Reshape to the shape torch.export recorded for the node's output, or to `size` when dynamic.
Value reshape_to_output(Builder& b, Value x, const SymIntList& size);

// comparison.cpp. A comparison promotes its inputs (a Python number included) to torch's result
// type; bool takes other ops than the numbers (Greater/Less*, Max/Min, Bitwise* take no bool).
Value compare(Builder& b, OpType op, Value self, Value other);
Value compare(Builder& b, OpType op, Value self, const Scalar& other);
Value logical(Builder& b, OpType op, Value self, Value other);
// torch's bitwise ops: `logical_op` on bool, `bitwise_op` on integers (bit by bit before opset 18).
Value bitwise(Builder& b, OpType logical_op, OpType bitwise_op, Value self, Value other);
Value bitwise(Builder& b, OpType logical_op, OpType bitwise_op, Value self, const Scalar& other);
// torch's bit shifts of integers (`left`, else right: arithmetic for signed types), amounts out
// of range included.
Value shift(Builder& b, Value self, Value other, bool left);
Value shift(Builder& b, Value self, const Scalar& other, bool left);
// Where(condition, x, y) in `dtype` (bool included); a nonzero uint8 condition is true, as in torch.
Value where_in(Builder& b, Value condition, Value x, Value y, ScalarType dtype);
// Max or Min of two tensors in their promoted dtype (Or or And on bool).
Value pairwise_extremum(Builder& b, OpType op, Value x, Value y);
Value clamp_numbers(Builder& b, Value self, const std::optional<Scalar>& lo, const std::optional<Scalar>& hi);
Value clamp_tensors(Builder& b, Value self, const std::optional<Value>& lo, const std::optional<Value>& hi);

// binary.cpp. Each computes in the dtype torch computes in (the node's output dtype); bool
// arithmetic is logic (+ is Or, * is And).
Value computed_scalar(Builder& b, Value self, const Scalar& value);
Value add(Builder& b, Value self, Value other, const Scalar& alpha);
Value mul(Builder& b, Value self, Value other);
// rounding_mode: none, "trunc" or "floor".
Value divide(Builder& b, Value self, Value other, const std::optional<std::string>& rounding_mode);
Value remainder(Builder& b, Value self, Value other);  // Python's (the sign of the divisor)
// `base_may_be_zero`/`exponent_may_be_negative`: false when a Scalar argument rules it out.
Value power(Builder& b, Value base, Value exponent, bool base_may_be_zero, bool exponent_may_be_negative);
Value angle_of(Builder& b, Value y, Value x);  // atan2

// creation.cpp. In the dtype torch.export recorded for the node's result.
// A tensor of `size`, or of the shape of `like`, filled with `value`.
Value filled(Builder& b, const Scalar& value, const SymIntList& size);
Value filled_like(Builder& b, const Scalar& value, Value like);
Value range(Builder& b, const Scalar& start, const Scalar& end, const Scalar& step);  // torch's arange
Value identity(Builder& b, const SymInt& n, const SymInt& m);                         // the n x m identity

// pooling.cpp. An empty stride is the kernel size; unbatched inputs are pooled with a batch axis.
Value max_pool(Builder& b, Value self, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode);
// The maxima and torch's indices of them, counted within each (batch, channel) plane.
std::array<Value, 2> max_pool_with_indices(Builder& b, Value self, const std::vector<int64_t>& kernel,
                                           const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
                                           const std::vector<int64_t>& dilation, bool ceil_mode);
Value avg_pool(Builder& b, Value self, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
               const std::vector<int64_t>& padding, bool ceil_mode, bool count_include_pad,
               std::optional<int64_t> divisor_override);
Value adaptive_avg_pool(Builder& b, Value self, const std::vector<int64_t>& out);
Value adaptive_avg_pool(Builder& b, Value self, const SymIntList& output_size);
std::array<Value, 2> adaptive_max_pool(Builder& b, Value self, const std::vector<int64_t>& out);

// upsample.cpp: Resize with torch's coordinate transforms. `mode` is torch's interpolation mode
// whatever the number of axes: "nearest", "nearest-exact", "linear" or "cubic".
Value upsample_vec(Builder& b, Value input, std::string_view mode, bool align_corners, bool antialias,
                   const std::optional<SymIntList>& output_size,
                   const std::optional<std::vector<double>>& scale_factors, int64_t spatial_rank);
Value upsample1d(Builder& b, Value self, std::string_view mode, bool align_corners, bool antialias,
                 const SymIntList& output_size, std::optional<double> scales);
Value upsample2d(Builder& b, Value self, std::string_view mode, bool align_corners, bool antialias,
                 const SymIntList& output_size, std::optional<double> scales_h, std::optional<double> scales_w);
Value upsample3d(Builder& b, Value self, std::string_view mode, bool align_corners, bool antialias,
                 const SymIntList& output_size, std::optional<double> scales_d, std::optional<double> scales_h,
                 std::optional<double> scales_w);

// norm.cpp. Statistics (mean, inverse std) come back with the reduced axes kept.
Value batch_norm_eval(Builder& b, Value input, const std::optional<Value>& weight, const std::optional<Value>& bias,
                      const std::optional<Value>& mean, const std::optional<Value>& var, double eps);
// `out` with the empty saved statistics torch returns when it normalizes with running ones.
std::array<Value, 3> with_empty_stats(Builder& b, Value out);
// The statistics in `stats_dtype`, or as ONNX computes them when absent (unused).
std::array<Value, 3> layer_norm_with_stats(Builder& b, Value input, const SymIntList& normalized_shape,
                                           const std::optional<Value>& weight, const std::optional<Value>& bias,
                                           double eps, std::optional<ScalarType> stats_dtype);
std::array<Value, 3> group_norm_with_stats(Builder& b, Value input, const std::optional<Value>& weight,
                                           const std::optional<Value>& bias, int64_t groups, double eps);
std::array<Value, 2> dropout_with_mask(Builder& b, Value input, double p, std::optional<bool> train);

// padding.cpp. torch's pads (from the last dimension backwards, negative ones crop) in its
// `mode`: "constant" (with `value`), "reflect", "replicate" or "circular".
Value padded(Builder& b, Value self, const SymIntList& pad, std::string_view mode, const Scalar& value);

// vision.cpp. torch's modes by number (GridSample from opset 16, 5-D inputs from 20).
Value grid_sample(Builder& b, Value input, Value grid, int64_t interpolation_mode, int64_t padding_mode,
                  bool align_corners);

// shape.cpp and slicing.cpp.
// Removes the dims of `dims` that have size 1 (torch ignores the others).
Value squeeze_size_one(Builder& b, Value self, const std::vector<int64_t>& dims);
Value squeeze_size_one(Builder& b, Value self, int64_t dim);
// The indices i of `counts` each repeated counts[i] times, `total` of them when known.
Value repeated_indices(Builder& b, Value counts, const std::optional<SymInt>& total);
// The upper (lower) triangle from `diagonal` on: Trilu from opset 14, a mask before.
Value trilu(Builder& b, Value self, const SymInt& diagonal, bool upper);

// conv.cpp: torch's convolution of any spatial rank and dtype; unbatched inputs allowed.
// With explicit ONNX pads [begin..., end...].
Value conv_nd(Builder& b, Value input, Value weight, const std::optional<Value>& bias, const SymIntList& stride,
              const std::vector<int64_t>& pads, const SymIntList& dilation, const SymInt& groups);
// Transposed (weight laid out as (C_in, C_out/groups, *kernel)).
Value conv_transpose_nd(Builder& b, Value input, Value weight, const std::optional<Value>& bias,
                        const SymIntList& stride, const SymIntList& padding, const SymIntList& output_padding,
                        const SymIntList& dilation, const SymInt& groups);

// embedding_bag.cpp: the bags' sums, means or maxima and the three outputs torch returns beside.
std::array<Value, 4> reduce_bags(Builder& b, Value weight, Value indices, Value offsets, int64_t mode,
                                 const std::optional<Value>& per_sample_weights, bool include_last_offset,
                                 const std::optional<Value>& padding_idx);

// scatter.cpp: `value` (a 0-d tensor) written at `index` along `dim`.
Value index_fill(Builder& b, Value self, int64_t dim, Value index, Value value);

// linalg.cpp: p-norm distances between the rows of x1 and x2, and between the rows of one tensor.
Value distances(Builder& b, Value x1, Value x2, double p);
Value pairwise_distances(Builder& b, Value self, double p);

// random.cpp. Draws of `dtype` by `op` (RandomUniform or RandomNormal, ...Like for the second).
Value random_of_size(Builder& b, OpType op, const SymIntList& size, ScalarType dtype);
Value random_like(Builder& b, OpType op, Value like, ScalarType dtype);
// 1 where a uniform draw shaped like `self` falls below the probability `p`, in the output dtype.
Value bernoulli_trials(Builder& b, Value self, Value p);
// Integers of `dtype` uniform in [low, high), shaped like `like`.
Value random_integers(Builder& b, Value like, SymInt low, SymInt high, ScalarType dtype);
Value random_integers_of_size(Builder& b, const SymIntList& size, SymInt low, SymInt high, ScalarType dtype);

// sorting.cpp: the `k` (all when absent) largest or smallest elements along `dim`, sorted, and
// their indices (TopK's order among equals is torch's stable order).
std::array<Value, 2> top_k(Builder& b, Value self, int64_t dim, bool largest, const std::optional<SymInt>& k);

// unary.cpp: all false, shaped like `x`.
Value all_false_like(Builder& b, Value x);

// reduction.cpp. torch's conventions: an absent or empty dim list reduces every dim, a 0-d tensor
// takes dim 0 or -1 and reduces to itself; bool is reduced as uint8 0/1 (exact).
using Axes = std::optional<std::vector<int64_t>>;
Axes axes_of(Builder& b, Value x, const Axes& dims);
Axes axis_of(Builder& b, Value x, int64_t dim);
Value reduce_extremum(Builder& b, OpType op, Value x, const Axes& axes, bool keepdim);
Value any_of(Builder& b, Value x, const Axes& axes, bool keepdim);
Value all_of(Builder& b, Value x, const Axes& axes, bool keepdim);
std::array<Value, 2> extremum_with_index(Builder& b, OpType reduce_op, OpType arg_op, Value self, int64_t dim,
                                         bool keepdim);
Value arg_extremum(Builder& b, OpType op, Value self, std::optional<int64_t> dim, bool keepdim);
Value product(Builder& b, Value self, const Axes& axes, bool keepdim);
Value count_nonzero_over(Builder& b, Value self, const Axes& axes);
Value log_sum_exp(Builder& b, Value self, const Axes& axes, bool keepdim);
// torch's mean: NaN over no elements.
Value mean_of(Builder& b, Value self, const Axes& axes, bool keepdim);
// Variance with torch's correction (Bessel's is 1), and the mean it deviates from.
Value variance(Builder& b, Value self, const Axes& dims, const std::optional<Scalar>& correction, bool keepdim);
std::array<Value, 2> variance_and_mean(Builder& b, Value self, const Axes& dims,
                                       const std::optional<Scalar>& correction, bool keepdim);
std::array<Value, 2> std_and_mean(Builder& b, Value self, const Axes& dims, const std::optional<Scalar>& correction,
                                  bool keepdim);
// The correction of the `unbiased=` overloads.
Scalar unbiased_correction(Builder& b, bool unbiased);
std::array<Value, 2> cumulative_extremum(Builder& b, OpType keep_later, Value self, int64_t dim);

}  // namespace fastonnx
