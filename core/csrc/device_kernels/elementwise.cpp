// Elementwise kernels: binary arithmetic, activations and their gradients.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

#include "device_kernels/kernel_args.h"
#include "device_kernels/strided_rows.h"

namespace torchplug::device_kernels {
namespace {

template <typename E, typename Op>
void map2(void* out, const void* a, const void* b, double scalar, int64_t count, Op op) {
  using V = typename E::value;
  auto* o = E::at(out);
  const auto* x = E::at(a);
  if (b == nullptr) {
    const V other = static_cast<V>(scalar);
    for (int64_t i = 0; i < count; ++i) {
      o[i] = E::store(op(E::load(x[i]), other));
    }
  } else {
    const auto* y = E::at(b);
    for (int64_t i = 0; i < count; ++i) {
      o[i] = E::store(op(E::load(x[i]), E::load(y[i])));
    }
  }
}

// A broadcast binary operation's iteration space: `out` is dense of `size`,
// and a and b are read through their strides (0 where they broadcast).
struct BroadcastShape {
  int64_t dims;
  int64_t size[kMaxBroadcastDims];
  int64_t a_stride[kMaxBroadcastDims];
  int64_t b_stride[kMaxBroadcastDims];
};

template <typename E, typename Op>
void map2_broadcast(void* out, const void* a, const void* b, const BroadcastShape& shape, Op op) {
  auto* o = E::at(out);
  const auto* x = E::at(a);
  const auto* y = E::at(b);
  const int64_t last = shape.dims - 1;
  const int64_t inner = shape.size[last];
  const int64_t x_step = shape.a_stride[last];
  const int64_t y_step = shape.b_stride[last];
  for_each_row<2>(shape.dims, shape.size, {shape.a_stride, shape.b_stride}, [&](int64_t row, const auto& offsets) {
    const auto* x_row = x + offsets[0];
    const auto* y_row = y + offsets[1];
    for (int64_t j = 0; j < inner; ++j) {
      o[row * inner + j] = E::store(op(E::load(x_row[j * x_step]), E::load(y_row[j * y_step])));
    }
  });
}

// Calls `body(operation)` with the element operation of BinaryOp `op`
// (alpha folded in); false for an unknown op.
template <typename V, typename Body>
bool with_binary_op(int64_t op, V alpha, Body&& body) {
  switch (static_cast<BinaryOp>(op)) {
    case BinaryOp::kAdd:
      if (alpha == V(1)) {
        body([](V p, V q) { return p + q; });
      } else {
        body([alpha](V p, V q) { return p + alpha * q; });
      }
      return true;
    case BinaryOp::kSub:
      body([alpha](V p, V q) { return p - alpha * q; });
      return true;
    case BinaryOp::kMul:
      body([](V p, V q) { return p * q; });
      return true;
    case BinaryOp::kDiv:
      body([](V p, V q) { return p / q; });
      return true;
    case BinaryOp::kPow:
      body([](V p, V q) { return std::pow(p, q); });
      return true;
  }
  return false;
}

template <typename V>
V sigmoid(V x) {
  return V(1) / (V(1) + std::exp(-x));
}

template <typename V>
V gelu(V x) {
  return V(0.5) * x * (V(1) + std::erf(x * V(M_SQRT1_2)));
}

// tanh's approximation of gelu, as torch's approximate='tanh'.
template <typename V>
V gelu_tanh_inner(V x) {
  return V(M_2_SQRTPI * M_SQRT1_2) * (x + V(0.044715) * x * x * x);
}

template <typename V>
V apply_unary(UnaryOp op, V x) {
  switch (op) {
    case UnaryOp::kNeg:
      return -x;
    case UnaryOp::kRelu:
      return x > V(0) ? x : (std::isnan(x) ? x : V(0));
    case UnaryOp::kSigmoid:
      return sigmoid(x);
    case UnaryOp::kTanh:
      return std::tanh(x);
    case UnaryOp::kExp:
      return std::exp(x);
    case UnaryOp::kGelu:
      return gelu(x);
    case UnaryOp::kGeluTanh:
      return V(0.5) * x * (V(1) + std::tanh(gelu_tanh_inner(x)));
    case UnaryOp::kSilu:
      return x * sigmoid(x);
    case UnaryOp::kRsqrt:  // as the CPU's vectorised rsqrt: a division, not an approximation
      return V(1) / std::sqrt(x);
    case UnaryOp::kCos:
      return std::cos(x);
    case UnaryOp::kSin:
      return std::sin(x);
  }
  return x;
}

// The gradient of `op` at `saved` (see kernel_abi.h), times `grad`.
template <typename V>
V apply_backward(UnaryOp op, V grad, V saved) {
  switch (op) {
    case UnaryOp::kRelu:  // as threshold_backward: only what is <= 0 stops the gradient (NaN passes it)
      return saved <= V(0) ? V(0) : grad;
    case UnaryOp::kSigmoid:
      return grad * saved * (V(1) - saved);
    case UnaryOp::kTanh:
      return grad * (V(1) - saved * saved);
    case UnaryOp::kGelu: {
      const V cdf = V(0.5) * (V(1) + std::erf(saved * V(M_SQRT1_2)));
      const V pdf = std::exp(V(-0.5) * saved * saved) * V(M_2_SQRTPI * M_SQRT1_2 * 0.5);
      return grad * (cdf + saved * pdf);
    }
    case UnaryOp::kGeluTanh: {
      const V inner = gelu_tanh_inner(saved);
      const V t = std::tanh(inner);
      const V d_inner = V(M_2_SQRTPI * M_SQRT1_2) * (V(1) + V(3 * 0.044715) * saved * saved);
      return grad * (V(0.5) * (V(1) + t) + V(0.5) * saved * (V(1) - t * t) * d_inner);
    }
    case UnaryOp::kSilu: {
      const V s = sigmoid(saved);
      return grad * s * (V(1) + saved * (V(1) - s));
    }
    case UnaryOp::kNeg:
    case UnaryOp::kExp:
    case UnaryOp::kRsqrt:
    case UnaryOp::kCos:
    case UnaryOp::kSin:
      break;  // no gradient kernel: has_backward refuses them first
  }
  return grad;
}

// Whether torchplug_unary_backward computes the gradient of `op`.
constexpr bool has_backward(UnaryOp op) {
  return op == UnaryOp::kRelu || op == UnaryOp::kSigmoid || op == UnaryOp::kTanh || op == UnaryOp::kGelu ||
         op == UnaryOp::kGeluTanh || op == UnaryOp::kSilu;
}

// Runs `body(Element<T>{}, std::integral_constant<UnaryOp, op>{})` for a
// unary kernel's dtype and op, checked.
template <typename Body>
int with_unary(KernelArgs& args, int64_t dtype, int64_t op, Body&& body) {
  if (args.ok() && (op < 0 || op >= kUnaryOpCount)) {
    return args.fail("has no operation %lld", static_cast<long long>(op));
  }
  // The element loop in `body` sees the operation as a constant, so the
  // compiler folds the switch in apply_unary and apply_backward out of it and
  // vectorises the loop.
  return with_dtype(args, dtype, [&](auto element) {
    return with_constant<kUnaryOpCount>(op, 1, [&](auto number) {
      return body(element, std::integral_constant<UnaryOp, static_cast<UnaryOp>(decltype(number)::value)>{});
    });
  });
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_binary) {
  const auto [out, a, b, count, dtype, op, alpha, scalar] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, double, double>();
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    using V = typename E::value;
    const bool known = with_binary_op<V>(op, static_cast<V>(alpha),
                                         [&](auto operation) { map2<E>(out, a, b, scalar, count, operation); });
    return known ? 0 : args.fail("has no operation %lld", static_cast<long long>(op));
  });
}

TORCHPLUG_DEVICE_KERNEL(torchplug_binary_broadcast) {
  const auto [out, a, b, dims, dtype, op, alpha] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, double>();
  if (dims < 1 || dims > kMaxBroadcastDims) {
    return args.fail("takes 1 to %lld dimensions, not %lld", static_cast<long long>(kMaxBroadcastDims),
                     static_cast<long long>(dims));
  }
  BroadcastShape shape{dims, {}, {}, {}};
  for (int64_t d = 0; d < dims; ++d) {
    std::tie(shape.size[d], shape.a_stride[d], shape.b_stride[d]) = args.read<int64_t, int64_t, int64_t>();
  }
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    using V = typename E::value;
    const bool known = with_binary_op<V>(
        op, static_cast<V>(alpha), [&](auto operation) { map2_broadcast<E>(out, a, b, shape, operation); });
    return known ? 0 : args.fail("has no operation %lld", static_cast<long long>(op));
  });
}

TORCHPLUG_DEVICE_KERNEL(torchplug_unary) {
  const auto [out, in, count, dtype, op] = args.read<void*, const void*, int64_t, int64_t, int64_t>();
  return with_unary(args, dtype, op, [&](auto element, auto constant) {
    using E = decltype(element);
    auto* o = E::at(out);
    const auto* x = E::at(in);
    for (int64_t i = 0; i < count; ++i) {
      o[i] = E::store(apply_unary(constant.value, E::load(x[i])));
    }
    return 0;
  });
}

// grad_in = grad_out * op'(saved), see kernel_abi.h.
TORCHPLUG_DEVICE_KERNEL(torchplug_unary_backward) {
  const auto [grad_in, grad_out, saved, count, dtype, op] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t>();
  return with_unary(args, dtype, op, [&](auto element, auto constant) {
    if constexpr (!has_backward(constant.value)) {
      return args.fail("has no gradient for operation %lld", static_cast<long long>(op));
    }
    using E = decltype(element);
    auto* d = E::at(grad_in);
    const auto* g = E::at(grad_out);
    const auto* v = E::at(saved);
    for (int64_t i = 0; i < count; ++i) {
      d[i] = E::store(apply_backward(constant.value, E::load(g[i]), E::load(v[i])));
    }
    return 0;
  });
}

}  // namespace torchplug::device_kernels
