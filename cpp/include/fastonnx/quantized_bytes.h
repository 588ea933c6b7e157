// Weights quantized block-wise while they are written (export(quantize=...)): each range of the
// quantized tensor and of its scales is computed from the model's own weight memory, as
// transposes and casts are (tensor_bytes.h), so a checkpoint larger than memory streams into an
// int4 model with the same bounded memory.
//
// The quantization is symmetric round-to-nearest along K in blocks: in each block, m is the
// weight of largest magnitude (its sign kept), the scale s = m / -2^(bits-1) rounded to the
// scales' dtype, and q = clamp(round_half_even(w * (1 / s)), -2^(bits-1), 2^(bits-1) - 1) (in
// float32, the reciprocal once per block, as onnxruntime's MLAS quantizer computes it), stored as
// q + 2^(bits-1) (MatMulNBits' default zero point), or q itself (DequantizeLinear's int4 and
// int8, without a zero point). m itself maps to -2^(bits-1) exactly, so all
// 2^bits levels are used; a block of zeros has scale 0 and q 0.
#pragma once

#include <cstdint>
#include <memory>

#include "fastonnx/tensor_bytes.h"
#include "fastonnx/types.h"

namespace fastonnx {

// A weight W of [n, k] (output features by input features, as torch's Linear holds it) in
// borrowed memory: W[i, j] is the element at data + (i * stride_n + j * stride_k) * element size.
struct WeightMatrix {
  const uint8_t* data = nullptr;
  std::shared_ptr<const void> owner;
  ScalarType dtype = ScalarType::Undefined;  // Float, Half or BFloat16
  // The dtype the model computes W in, when the borrowed memory holds another (a checkpoint cast
  // while streamed): each weight is rounded to it first, so that a streamed weight is quantized
  // exactly as the same weight cast in memory (or folded eagerly, when small) is.
  ScalarType model_dtype = ScalarType::Undefined;
  int64_t n = 0, k = 0;
  int64_t stride_n = 0, stride_k = 0;
};

struct BlockQuantization {
  // onnxruntime's MatMulNBits kernels take blocks of 16 to 256; a block is computed on the stack.
  static constexpr int64_t kMaxBlock = 256;
  int bits = 4;  // 4 or 8
  int64_t block = 32;
  int64_t blocks(int64_t k) const { return (k + block - 1) / block; }
  int64_t blob_bytes() const { return block * bits / 8; }
};

// MatMulNBits' B: uint8 [n, blocks(k), blob_bytes()], each block's values packed along K, low
// bits first; a last block that K does not fill is padded with zeros.
// (`scale_dtype`: the dtype the scales are stored in, which the values round against.)
std::shared_ptr<const TensorBytes> quantized_blocks(const WeightMatrix& w, BlockQuantization q, ScalarType scale_dtype);

// Their scales, [n, blocks(k)] of `dtype` (the activations' type).
std::shared_ptr<const TensorBytes> block_scales(const WeightMatrix& w, BlockQuantization q, ScalarType dtype);

// The same quantization as standard ONNX's blocked DequantizeLinear (opset 21, axis 0) reads it,
// in MatMul's layout: x is q itself (no zero point), [k, n] of int4 or int8, a 4-bit tensor
// packed as ONNX packs one (element i of the flattened tensor in the low bits of byte i / 2 when
// i is even, the high bits when odd; across rows when n is odd); the same q for each weight as
// quantized_blocks.
std::shared_ptr<const TensorBytes> quantized_columns(const WeightMatrix& w, BlockQuantization q,
                                                     ScalarType scale_dtype);

// Their scales, [blocks(k), n] of `dtype`: the scales of block_scales, transposed.
std::shared_ptr<const TensorBytes> column_scales(const WeightMatrix& w, BlockQuantization q, ScalarType dtype);

}  // namespace fastonnx
