"""The signatures of the lowercase calls a mapping spec may make, the one place codegen reads
them from (model.HELPERS parses them). Each is written as a schema; ``op`` is the name of an
ONNX op (checked against onnx.defs), ``axes`` torch dims as ONNX axes (absent: every axis).

- Attribute helpers give an attribute's value; their C++ functions are ``helper_<name>``.
- Tensor helpers build nodes as a hand-written body would; their C++ functions have the
  helper's name and take the Builder first. Both are declared in cpp/include/fastonnx/helpers.h.
- Guard helpers read what the exporter knows, in `when:` only.
"""

from __future__ import annotations

# (role, signature); the roles are model.HelperRole's.
SIGNATURES: list[tuple[str, str]] = [
    # -- attributes ------------------------------------------------------------------------
    # ONNX pads from torch's symmetric per-dimension padding: [a, b] -> [a, b, a, b]
    ("attribute", "twice(int[]|SymInt[] padding) -> int[]"),
    # pads for a convolution's padding="same"/"valid"
    ("attribute", "conv_pads(str padding, Tensor weight, SymInt[] dilation) -> int[]"),
    # ConvTranspose pads and output_padding with torch's output_padding folded into the end pads
    # where it fits (onnxruntime rejects output_padding >= stride, torch does not).
    ("attribute", "transpose_pads(SymInt[] padding, SymInt[] output_padding) -> int[]"),
    ("attribute", "transpose_output_padding(SymInt[] padding, SymInt[] output_padding) -> int[]"),
    # -- guards ----------------------------------------------------------------------------
    ("guard", "rank(Tensor self) -> int"),  # static rank of a tensor
    ("guard", "len(int[] list) -> int"),  # length of a list argument
    ("guard", "is_floating(Tensor self) -> bool"),  # whether a tensor's dtype is a floating type
    # a tensor's dtype, compared with a torch dtype name: dtype(self) == "bool"
    ("guard", "dtype(Tensor self) -> ScalarType"),
    # -- common.cpp ------------------------------------------------------------------------
    # Builder::cast: a Cast unless self has the dtype already (complex pairs kept)
    ("tensor", "cast(Tensor self, ScalarType dtype) -> Tensor"),
    # Builder::dtype and scalar: a tensor's dtype, and a 0-d tensor of a number in a dtype
    ("tensor", "dtype_of(Tensor self) -> ScalarType"),
    ("tensor", "scalar(Scalar value, ScalarType dtype) -> Tensor"),
    # Builder::as_real and as_complex: a complex tensor as its (real, imaginary) pairs and back
    ("tensor", "as_real(Tensor self) -> Tensor"),
    ("tensor", "as_complex(Tensor self) -> Tensor"),
    ("tensor", "output_dtype(int index) -> ScalarType"),  # the dtype torch.export recorded for an output
    # to the shape torch.export recorded for the output, or to size when dynamic
    ("tensor", "reshape_to_output(Tensor self, SymInt[] size) -> Tensor"),
    # -- tensors: comparison.cpp --------------------------------------------------------------
    ("tensor", "compare(op op, Tensor self, Tensor|Scalar other) -> Tensor"),
    ("tensor", "logical(op op, Tensor self, Tensor other) -> Tensor"),
    ("tensor", "bitwise(op logical_op, op bitwise_op, Tensor self, Tensor|Scalar other) -> Tensor"),
    ("tensor", "shift(Tensor self, Tensor|Scalar other, bool left) -> Tensor"),
    # Where in `dtype`, bool included (onnxruntime has no bool Where)
    ("tensor", "where_in(Tensor condition, Tensor x, Tensor y, ScalarType dtype) -> Tensor"),
    ("tensor", "pairwise_extremum(op op, Tensor self, Tensor other) -> Tensor"),
    ("tensor", "clamp_numbers(Tensor self, Scalar? min, Scalar? max) -> Tensor"),
    ("tensor", "clamp_tensors(Tensor self, Tensor? min, Tensor? max) -> Tensor"),
    # -- tensors: binary.cpp ------------------------------------------------------------------
    # a Python number as a tensor in the dtype torch computes `self` op number in
    ("tensor", "computed_scalar(Tensor self, Scalar value) -> Tensor"),
    ("tensor", "add(Tensor self, Tensor other, Scalar alpha) -> Tensor"),
    ("tensor", "mul(Tensor self, Tensor other) -> Tensor"),
    ("tensor", "divide(Tensor self, Tensor other, str? rounding_mode) -> Tensor"),
    ("tensor", "remainder(Tensor self, Tensor other) -> Tensor"),
    ("tensor", "power(Tensor self, Tensor exponent, bool base_may_be_zero, bool exponent_may_be_negative) -> Tensor"),
    ("tensor", "angle_of(Tensor y, Tensor x) -> Tensor"),
    # -- tensors: creation.cpp, in the dtype torch.export recorded for the result -------------
    ("tensor", "filled(Scalar value, SymInt[] size) -> Tensor"),
    ("tensor", "filled_like(Scalar value, Tensor like) -> Tensor"),
    ("tensor", "range(Scalar start, Scalar end, Scalar step) -> Tensor"),
    ("tensor", "identity(SymInt n, SymInt m) -> Tensor"),
    # -- tensors: pooling.cpp -----------------------------------------------------------------
    (
        "tensor",
        "max_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, bool ceil_mode)"
        " -> Tensor",
    ),
    (
        "tensor",
        "max_pool_with_indices(Tensor self, int[] kernel_size, int[] stride, int[] padding, int[] dilation, "
        "bool ceil_mode) -> (Tensor, Tensor)",
    ),
    (
        "tensor",
        "avg_pool(Tensor self, int[] kernel_size, int[] stride, int[] padding, bool ceil_mode, "
        "bool count_include_pad, int? divisor_override) -> Tensor",
    ),
    ("tensor", "adaptive_avg_pool(Tensor self, int[]|SymInt[] output_size) -> Tensor"),
    ("tensor", "adaptive_max_pool(Tensor self, int[] output_size) -> (Tensor, Tensor)"),
    # -- tensors: upsample.cpp; mode: "nearest", "nearest-exact", "linear" or "cubic" ----------
    (
        "tensor",
        "upsample_vec(Tensor input, str mode, bool align_corners, bool antialias, SymInt[]? output_size, "
        "float[]? scale_factors, int spatial_rank) -> Tensor",
    ),
    (
        "tensor",
        "upsample1d(Tensor self, str mode, bool align_corners, bool antialias, SymInt[] output_size, "
        "float? scales) -> Tensor",
    ),
    (
        "tensor",
        "upsample2d(Tensor self, str mode, bool align_corners, bool antialias, SymInt[] output_size, "
        "float? scales_h, float? scales_w) -> Tensor",
    ),
    (
        "tensor",
        "upsample3d(Tensor self, str mode, bool align_corners, bool antialias, SymInt[] output_size, "
        "float? scales_d, float? scales_h, float? scales_w) -> Tensor",
    ),
    # -- tensors: norm.cpp; statistics (mean, inverse std) keep the reduced axes --------------
    (
        "tensor",
        "batch_norm_eval(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, Tensor? running_var, "
        "float eps) -> Tensor",
    ),
    # the empty saved statistics torch returns when it normalizes with running ones
    ("tensor", "with_empty_stats(Tensor out) -> (Tensor, Tensor, Tensor)"),
    # the statistics in stats_dtype, or as ONNX computes them when absent (unused)
    (
        "tensor",
        "layer_norm_with_stats(Tensor input, SymInt[] normalized_shape, Tensor? weight, Tensor? bias, float eps, "
        "ScalarType? stats_dtype) -> (Tensor, Tensor, Tensor)",
    ),
    (
        "tensor",
        "group_norm_with_stats(Tensor input, Tensor? weight, Tensor? bias, int groups, float eps) "
        "-> (Tensor, Tensor, Tensor)",
    ),
    ("tensor", "dropout_with_mask(Tensor input, float p, bool? train) -> (Tensor, Tensor)"),
    # -- tensors: padding.cpp; mode: "constant" (with value), "reflect", "replicate", "circular"
    ("tensor", "padded(Tensor self, SymInt[] pad, str mode, Scalar value) -> Tensor"),
    # -- tensors: vision.cpp ------------------------------------------------------------------
    (
        "tensor",
        "grid_sample(Tensor input, Tensor grid, int interpolation_mode, int padding_mode, bool align_corners) "
        "-> Tensor",
    ),
    # -- tensors: shape.cpp and slicing.cpp -----------------------------------------------------
    ("tensor", "squeeze_size_one(Tensor self, int[]|int dims) -> Tensor"),  # the dims of size 1 among dims
    ("tensor", "repeated_indices(Tensor counts, SymInt? total) -> Tensor"),
    ("tensor", "trilu(Tensor self, SymInt diagonal, bool upper) -> Tensor"),
    # -- tensors: conv.cpp, any spatial rank and dtype -------------------------------------------
    (
        "tensor",
        "conv_nd(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, int[] pads, SymInt[] dilation, "
        "SymInt groups) -> Tensor",
    ),
    (
        "tensor",
        "conv_transpose_nd(Tensor input, Tensor weight, Tensor? bias, SymInt[] stride, SymInt[] padding, "
        "SymInt[] output_padding, SymInt[] dilation, SymInt groups) -> Tensor",
    ),
    # -- tensors: embedding_bag.cpp -------------------------------------------------------------
    (
        "tensor",
        "reduce_bags(Tensor weight, Tensor indices, Tensor offsets, int mode, Tensor? per_sample_weights, "
        "bool include_last_offset, Tensor? padding_idx) -> (Tensor, Tensor, Tensor, Tensor)",
    ),
    # -- tensors: scatter.cpp -------------------------------------------------------------------
    ("tensor", "index_fill(Tensor self, int dim, Tensor index, Tensor value) -> Tensor"),
    # -- tensors: linalg.cpp --------------------------------------------------------------------
    ("tensor", "distances(Tensor x1, Tensor x2, float p) -> Tensor"),
    ("tensor", "pairwise_distances(Tensor self, float p) -> Tensor"),
    # -- tensors: random.cpp; op: RandomUniform or RandomNormal (...Like for random_like) -------
    ("tensor", "random_of_size(op op, SymInt[] size, ScalarType dtype) -> Tensor"),
    ("tensor", "random_like(op op, Tensor like, ScalarType dtype) -> Tensor"),
    ("tensor", "bernoulli_trials(Tensor self, Tensor p) -> Tensor"),
    ("tensor", "random_integers(Tensor like, SymInt low, SymInt high, ScalarType dtype) -> Tensor"),
    ("tensor", "random_integers_of_size(SymInt[] size, SymInt low, SymInt high, ScalarType dtype) -> Tensor"),
    # -- tensors: sorting.cpp -------------------------------------------------------------------
    ("tensor", "top_k(Tensor self, int dim, bool largest, SymInt? k) -> (Tensor, Tensor)"),
    # -- tensors: unary.cpp ---------------------------------------------------------------------
    ("tensor", "all_false_like(Tensor self) -> Tensor"),
    # -- tensors: reduction.cpp ---------------------------------------------------------------
    ("tensor", "axes_of(Tensor self, int[]? dims) -> axes"),
    ("tensor", "axis_of(Tensor self, int dim) -> axes"),
    ("tensor", "reduce_extremum(op op, Tensor self, axes axes, bool keepdim) -> Tensor"),
    ("tensor", "any_of(Tensor self, axes axes, bool keepdim) -> Tensor"),
    ("tensor", "all_of(Tensor self, axes axes, bool keepdim) -> Tensor"),
    ("tensor", "extremum_with_index(op reduce_op, op arg_op, Tensor self, int dim, bool keepdim) -> (Tensor, Tensor)"),
    ("tensor", "arg_extremum(op op, Tensor self, int? dim, bool keepdim) -> Tensor"),
    ("tensor", "product(Tensor self, axes axes, bool keepdim) -> Tensor"),
    ("tensor", "count_nonzero_over(Tensor self, axes axes) -> Tensor"),
    ("tensor", "log_sum_exp(Tensor self, axes axes, bool keepdim) -> Tensor"),
    ("tensor", "mean_of(Tensor self, axes axes, bool keepdim) -> Tensor"),
    ("tensor", "variance(Tensor self, int[]? dim, Scalar? correction, bool keepdim) -> Tensor"),
    ("tensor", "variance_and_mean(Tensor self, int[]? dim, Scalar? correction, bool keepdim) -> (Tensor, Tensor)"),
    ("tensor", "std_and_mean(Tensor self, int[]? dim, Scalar? correction, bool keepdim) -> (Tensor, Tensor)"),
    ("tensor", "unbiased_correction(bool unbiased) -> Scalar"),
    ("tensor", "cumulative_extremum(op keep_later, Tensor self, int dim) -> (Tensor, Tensor)"),
]
