// The optimizers' foreach steps: one launch applies an elementwise update to
// every tensor of a parameter list, as CUDA's multi-tensor apply does, with
// the CPU's formulas (lerp's two-sided form, addcmul's and addcdiv's order).
#include <cmath>
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

struct Operands {
  void* out;
  const void* a;
  const void* b;
  const void* c;
  int64_t count;
  double scalar;
};

Operands read_operands(KernelArgs& args) {
  const auto [out, a, b, c, count, scalar] = args.read<void*, const void*, const void*, const void*, int64_t, double>();
  return Operands{out, a, b, c, count, scalar};
}

// Whether `op` finds the operands it reads (b for the binary ones, b and c for
// the ternary ones), so a launch the core got wrong fails instead of reading NULL.
bool has_operands(ForeachOp op, const Operands& operands) {
  const bool needs_b = op == ForeachOp::kAddScaled || op == ForeachOp::kLerp || op == ForeachOp::kAddcmul ||
                       op == ForeachOp::kAddcdiv;
  const bool needs_c = op == ForeachOp::kAddcmul || op == ForeachOp::kAddcdiv;
  return operands.out != nullptr && operands.a != nullptr && (!needs_b || operands.b != nullptr) &&
         (!needs_c || operands.c != nullptr) && operands.count >= 0;
}

template <typename E, typename Op>
void map(const Operands& operands, Op op) {
  auto* out = E::at(operands.out);
  const auto* a = E::at(operands.a);
  const auto* b = E::at(operands.b);
  const auto* c = E::at(operands.c);
  for (int64_t i = 0; i < operands.count; ++i) {
    out[i] = E::store(op(a, b, c, i));
  }
}

template <typename E>
void apply(ForeachOp op, const Operands& operands) {
  using V = typename E::value;
  const V s = static_cast<V>(operands.scalar);
  const auto load = [](const typename E::type* data, int64_t i) { return E::load(data[i]); };
  switch (op) {
    case ForeachOp::kAddScalar:
      return map<E>(operands, [&](auto a, auto, auto, int64_t i) { return load(a, i) + s; });
    case ForeachOp::kMulScalar:
      return map<E>(operands, [&](auto a, auto, auto, int64_t i) { return load(a, i) * s; });
    case ForeachOp::kDivScalar:
      return map<E>(operands, [&](auto a, auto, auto, int64_t i) { return load(a, i) / s; });
    case ForeachOp::kAddScaled:
      return map<E>(operands, [&](auto a, auto b, auto, int64_t i) { return load(a, i) + s * load(b, i); });
    case ForeachOp::kLerp:
      return map<E>(operands, [&](auto a, auto b, auto, int64_t i) {
        const V start = load(a, i);
        const V end = load(b, i);
        return std::abs(s) < V(0.5) ? start + s * (end - start) : end - (end - start) * (V(1) - s);
      });
    case ForeachOp::kAddcmul:
      return map<E>(operands, [&](auto a, auto b, auto c, int64_t i) { return load(a, i) + s * load(b, i) * load(c, i); });
    case ForeachOp::kAddcdiv:
      return map<E>(operands, [&](auto a, auto b, auto c, int64_t i) { return load(a, i) + s * load(b, i) / load(c, i); });
    case ForeachOp::kSqrt:
      return map<E>(operands, [&](auto a, auto, auto, int64_t i) { return std::sqrt(load(a, i)); });
  }
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_foreach) {
  const auto [op_code, dtype, count] = args.read<int64_t, int64_t, int64_t>();
  if (op_code < 0 || op_code > static_cast<int64_t>(ForeachOp::kSqrt)) {
    return args.fail("has no operation %lld", static_cast<long long>(op_code));
  }
  const auto op = static_cast<ForeachOp>(op_code);
  // Every tensor's operands are checked before any is written: a bad launch changes nothing.
  KernelArgs check = args;
  for (int64_t t = 0; t < count; ++t) {
    if (!has_operands(op, read_operands(check))) {
      return check.fail("misses an operand of tensor %lld", static_cast<long long>(t));
    }
  }
  // `check` has read every argument; the pass that writes reads them again from `args`.
  return with_dtype(check, dtype, [&](auto element) {
    using E = decltype(element);
    for (int64_t t = 0; t < count; ++t) {
      apply<E>(op, read_operands(args));
    }
    return 0;
  });
}

}  // namespace torchplug::device_kernels
