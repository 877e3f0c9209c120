#pragma once
// The contract between the core and its device kernels
// (TPD_KERNEL_FORMAT_HOST_ELF images, built from this folder): each kernel's
// exported name and the arguments it takes, in order. The core launches them
// through the driver (kernels/module_kernels.cpp); the image includes no
// torch header and links nothing but the C library. Tensors are dense
// (contiguous) unless a kernel takes strides.
#include <cstdint>

namespace torchplug::device_kernels {

// Element types, as the kernels' `dtype` argument and the conversion's
// `out_type` and `in_type`. The arithmetic kernels take the floating types
// (up to kBFloat16); the conversion takes every one.
enum class DType : int64_t {
  kFloat32 = 0, kFloat64 = 1, kBFloat16 = 2, kBool = 3, kUInt8 = 4, kInt8 = 5, kInt16 = 6, kInt32 = 7, kInt64 = 8
};
inline constexpr int64_t kDTypeCount = static_cast<int64_t>(DType::kInt64) + 1;
inline constexpr int64_t kArithmeticDTypeCount = static_cast<int64_t>(DType::kBFloat16) + 1;
inline constexpr bool is_arithmetic_dtype(DType type) { return static_cast<int64_t>(type) < kArithmeticDTypeCount; }

// torchplug_binary(out*, a*, b*, count, dtype, op, alpha, scalar):
// out = a op (alpha * b) for add and sub, a op b for mul, div and pow; a NULL
// `b` stands for the float64 `scalar`. `out` may be `a` or `b` (in place).
inline constexpr const char kBinary[] = "torchplug_binary";
enum class BinaryOp : int64_t { kAdd = 0, kSub = 1, kMul = 2, kDiv = 3, kPow = 4 };

// torchplug_binary_broadcast(out*, a*, b*, dims, dtype, op, alpha, then for
// each of `dims` dimensions: size, a_stride, b_stride): the binary operation
// over a and b read through their strides (in elements, 0 where one
// broadcasts) into `out`, dense of those sizes, which overlaps neither.
inline constexpr const char kBinaryBroadcast[] = "torchplug_binary_broadcast";
inline constexpr int64_t kMaxBroadcastDims = 8;

// torchplug_unary(out*, in*, count, dtype, op); `out` may be `in`.
inline constexpr const char kUnary[] = "torchplug_unary";
enum class UnaryOp : int64_t {
  kNeg = 0, kRelu = 1, kSigmoid = 2, kTanh = 3, kExp = 4, kGelu = 5, kGeluTanh = 6, kSilu = 7, kRsqrt = 8,
  kCos = 9, kSin = 10
};
// The operations are numbered from 0 without a gap.
inline constexpr int64_t kUnaryOpCount = static_cast<int64_t>(UnaryOp::kSin) + 1;

// torchplug_unary_backward(grad_in*, grad_out*, saved*, count, dtype, op):
// the gradient of UnaryOp `op` (kRelu, kSigmoid, kTanh, kGelu, kGeluTanh,
// kSilu); `saved` is the forward's output for kRelu, kSigmoid and kTanh, its
// input for the others.
inline constexpr const char kUnaryBackward[] = "torchplug_unary_backward";

// torchplug_gemm(out*, a*, b*, bias*, m, n, k, a_row_stride, a_col_stride,
// b_row_stride, b_col_stride, bias_row_stride, bias_col_stride, dtype, beta, alpha):
// out (m x n, dense) = beta * bias + alpha * (a @ b), with a (m x k) and b
// (k x n) read through their strides (in elements); bias NULL for none, its
// strides 0 where it broadcasts.
inline constexpr const char kGemm[] = "torchplug_gemm";
// torchplug_gemm_batched(out*, a*, b*, batch, m, n, k, a_batch_stride,
// a_row_stride, a_col_stride, b_batch_stride, b_row_stride, b_col_stride,
// dtype): bmm in one launch: out's entry i (m x n, dense, entries m * n
// apart) = a's entry i (m x k) @ b's entry i (k x n), all read through their
// strides (in elements; a batch stride 0 where an operand broadcasts).
inline constexpr const char kGemmBatched[] = "torchplug_gemm_batched";

// torchplug_softmax(out*, in*, rows, columns, dtype, mode): the SoftmaxMode
// `mode` over each row's `columns` dense elements.
inline constexpr const char kSoftmax[] = "torchplug_softmax";
// kSafe: softmax, but zeros for a row whose every element is -inf (where
// softmax gives NaN), as torch's _safe_softmax, which attention runs.
enum class SoftmaxMode : int64_t { kSoftmax = 0, kLogSoftmax = 1, kSafe = 2 };
// torchplug_softmax_backward(grad_in*, grad_out*, out*, rows, columns, dtype,
// log): the gradient of softmax (log 0, kSafe's too) or log_softmax (log 1).
inline constexpr const char kSoftmaxBackward[] = "torchplug_softmax_backward";

// torchplug_fill(out*, count, element_bytes, low, high): each of `count`
// elements of `element_bytes` (at most 16) set to the first `element_bytes`
// bytes of the pattern `low`, `high` (little-endian int64s): the value as
// the host converted it to the element type, so any type is filled.
inline constexpr const char kFill[] = "torchplug_fill";

// torchplug_sum(out*, in*, outer, reduce, inner, dtype): `in` read as
// (outer, reduce, inner), summed over the middle: out[o][i] = sum_r in[o][r][i].
inline constexpr const char kSum[] = "torchplug_sum";

// torchplug_nll_loss(out*, total_weight*, input*, target*, weight*, rows,
// classes, reduction, ignore_index, dtype): nll_loss_forward over `rows` rows
// of `classes` log-probabilities, int64 targets, optional per-class weights;
// `reduction` as torch's (0 none, 1 mean, 2 sum). A target outside
// [0, classes) that is not `ignore_index` fails the kernel.
inline constexpr const char kNllLoss[] = "torchplug_nll_loss";
// torchplug_nll_loss_backward(grad_input*, grad_output*, target*, weight*,
// total_weight*, rows, classes, reduction, ignore_index, dtype).
inline constexpr const char kNllLossBackward[] = "torchplug_nll_loss_backward";

// torchplug_layer_norm(out*, mean*, rstd*, input*, weight*, bias*, rows,
// columns, eps, dtype): native_layer_norm over each of `rows` rows of
// `columns` elements; weight and bias (`columns` each) may be NULL; mean and
// rstd get one value per row, in the input's type.
inline constexpr const char kLayerNorm[] = "torchplug_layer_norm";
// torchplug_layer_norm_backward(grad_input*, grad_weight*, grad_bias*,
// grad_out*, input*, mean*, rstd*, weight*, rows, columns, dtype): the
// gradients asked for (the others NULL); weight may be NULL.
inline constexpr const char kLayerNormBackward[] = "torchplug_layer_norm_backward";

// torchplug_foreach(op, dtype, count, then for each of `count` tensors:
// out*, a*, b*, c*, numel, scalar): the optimizers' foreach steps, one
// launch for a whole parameter list. Per tensor, with s its `scalar`:
// kAddScalar out = a + s; kMulScalar out = a * s; kDivScalar out = a / s;
// kAddScaled out = a + s * b; kLerp out = lerp(a, b, s); kAddcmul
// out = a + s * b * c; kAddcdiv out = a + s * b / c; kSqrt out = sqrt(a).
// Operands an operation does not use are NULL; `out` may be `a` (in place).
inline constexpr const char kForeach[] = "torchplug_foreach";
enum class ForeachOp : int64_t {
  kAddScalar = 0, kMulScalar = 1, kDivScalar = 2, kAddScaled = 3, kLerp = 4, kAddcmul = 5, kAddcdiv = 6, kSqrt = 7
};

// torchplug_index_rows(out*, table*, indices*, count, rows, row_bytes,
// index_bytes, wrap_negative): index_select over the first dimension (an
// embedding lookup) and indexing by one index tensor there: out's row i is
// the table's row indices[i], `row_bytes` bytes each (any element type);
// indices are int64 (`index_bytes` 8) or int32 (4). With `wrap_negative` 1 a
// negative index counts from the end, as indexing's do; an index naming no
// row fails the kernel.
inline constexpr const char kIndexRows[] = "torchplug_index_rows";
// torchplug_index_put_rows(self*, values*, indices*, count, rows, row_bytes,
// index_bytes, accumulate, dtype): index_put_ by one index tensor over the
// first dimension: values' row i written to (`accumulate` 0, any element
// type) or added to (1, element type `dtype`) self's row indices[i], in the
// order of i as the CPU's serial loop; indices as torchplug_index_rows's
// with negative ones wrapping.
inline constexpr const char kIndexPutRows[] = "torchplug_index_put_rows";
// torchplug_embedding_backward(grad_weight*, grad*, indices*, count, rows,
// columns, padding_idx, index_bytes, dtype): embedding_dense_backward without
// scale_grad_by_freq: grad_weight (rows x columns) zeroed, then grad's row i
// added to row indices[i], in the order of i (as the CPU's loop), skipping
// `padding_idx`.
inline constexpr const char kEmbeddingBackward[] = "torchplug_embedding_backward";

// torchplug_strided_copy(dst*, src*, dims, element_bytes, then for each of
// `dims` dimensions: size, dst_stride, src_stride): every element of a
// strided view of `src` copied to the same place of a strided view of `dst`
// (strides in elements, `element_bytes` each, any element type); what
// .contiguous(), cat and copy_ between views of one device run. The two
// views overlap neither each other nor themselves.
inline constexpr const char kStridedCopy[] = "torchplug_strided_copy";
inline constexpr int64_t kMaxCopyDims = 8;

// torchplug_convert(out*, in*, count, out_type, in_type) (two DTypes): each of `count`
// dense elements of `in` converted to out's type as torch converts them
// (static_cast; to bool, whether it is nonzero; to bfloat16, rounded to
// nearest even). What copy_ and .to() between two types run.
inline constexpr const char kConvert[] = "torchplug_convert";

// torchplug_where(out*, condition*, a*, b*, dims, element_bytes, then for
// each of `dims` dimensions: size, out_stride, condition_stride, a_stride,
// b_stride): out = condition ? a : b elementwise over the strided views
// (strides in elements, 0 where an operand broadcasts; condition bool, the
// others `element_bytes` each, any element type); `out` overlaps no input.
inline constexpr const char kWhere[] = "torchplug_where";
// torchplug_triangle(out*, in*, matrices, rows, columns, element_bytes,
// diagonal, upper): tril (`upper` 0) or triu (1) of each of `matrices`
// dense rows x columns matrices: the elements on the kept side of
// `diagonal` copied, the others zero bytes (any element type).
inline constexpr const char kTriangle[] = "torchplug_triangle";

// torchplug_arange(out*, count, type, start, step): out[i] = start + i * step
// for i < count, integers written as the RangeType `type`: arange over whole
// numbers, which every element type the kernel writes holds exactly.
inline constexpr const char kArange[] = "torchplug_arange";
enum class RangeType : int64_t { kInt64 = 0, kInt32 = 1, kFloat32 = 2, kFloat64 = 3 };

// torchplug_dropout(out*, in*, mask*, count, dtype, scale, round_scale):
// dropout's elementwise part for the bool `mask` drawn on the host (1 keeps
// an element): `in` times `scale` where the mask keeps it, times zero where
// it does not (so NaN stays NaN and signs stay, as on the CPU). The forward
// (`round_scale` 1) rounds `scale` to the element type first, as the CPU's
// native_dropout does; the backward (0) multiplies by it as it is.
inline constexpr const char kDropout[] = "torchplug_dropout";

}  // namespace torchplug::device_kernels
