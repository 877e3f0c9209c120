// Elementwise kernels: binary arithmetic, activations and their gradients.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

template <typename T, typename Op>
void map2(T* out, const T* a, const T* b, double scalar, int64_t count, Op op) {
  using C = Compute<T>;
  using V = typename C::type;
  if (b == nullptr) {
    const V other = static_cast<V>(scalar);
    for (int64_t i = 0; i < count; ++i) {
      out[i] = C::store(op(C::load(a[i]), other));
    }
  } else {
    for (int64_t i = 0; i < count; ++i) {
      out[i] = C::store(op(C::load(a[i]), C::load(b[i])));
    }
  }
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
      break;
  }
  return grad;
}

// Calls `body(std::integral_constant<UnaryOp, op>{})`: the element loop in
// `body` sees the operation as a constant, so the compiler folds the switch in
// apply_unary and apply_backward out of it and vectorises the loop.
template <typename Body>
int with_constant_op(UnaryOp op, Body&& body) {
  switch (op) {
    case UnaryOp::kNeg:
      return body(std::integral_constant<UnaryOp, UnaryOp::kNeg>{});
    case UnaryOp::kRelu:
      return body(std::integral_constant<UnaryOp, UnaryOp::kRelu>{});
    case UnaryOp::kSigmoid:
      return body(std::integral_constant<UnaryOp, UnaryOp::kSigmoid>{});
    case UnaryOp::kTanh:
      return body(std::integral_constant<UnaryOp, UnaryOp::kTanh>{});
    case UnaryOp::kExp:
      return body(std::integral_constant<UnaryOp, UnaryOp::kExp>{});
    case UnaryOp::kGelu:
      return body(std::integral_constant<UnaryOp, UnaryOp::kGelu>{});
    case UnaryOp::kGeluTanh:
      return body(std::integral_constant<UnaryOp, UnaryOp::kGeluTanh>{});
    case UnaryOp::kSilu:
      return body(std::integral_constant<UnaryOp, UnaryOp::kSilu>{});
  }
  return 1;
}

// The rest of a unary kernel's arguments after its pointers (count, dtype,
// op), checked: runs `body(Element<T>{}, count, op)`.
template <typename Body>
int with_unary_op(KernelArgs& args, Body&& body) {
  const int64_t count = args.integer();
  const int64_t dtype = args.integer();
  const int64_t op = args.integer();
  if (!args.ok()) {
    return 1;
  }
  if (op < 0 || op > static_cast<int64_t>(UnaryOp::kSilu)) {
    return args.fail("has no operation %lld", static_cast<long long>(op));
  }
  return with_dtype(args, dtype, [&](auto element) { return body(element, count, static_cast<UnaryOp>(op)); });
}

}  // namespace
}  // namespace torchplug::device_kernels

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernels below

TORCHPLUG_KERNEL torchplug_binary(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  const void* a = args.pointer();
  const void* b = args.pointer();
  const int64_t count = args.integer();
  const int64_t dtype = args.integer();
  const int64_t op = args.integer();
  const double alpha = args.number();
  const double scalar = args.number();
  if (!args.ok()) {
    return 1;
  }
  return with_dtype(args, dtype, [&](auto element) {
    using T = typename decltype(element)::type;
    using V = typename Compute<T>::type;
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    const V scale = static_cast<V>(alpha);
    switch (static_cast<BinaryOp>(op)) {
      case BinaryOp::kAdd:
        if (scale == V(1)) {
          map2(o, x, y, scalar, count, [](V p, V q) { return p + q; });
        } else {
          map2(o, x, y, scalar, count, [scale](V p, V q) { return p + scale * q; });
        }
        return 0;
      case BinaryOp::kSub:
        map2(o, x, y, scalar, count, [scale](V p, V q) { return p - scale * q; });
        return 0;
      case BinaryOp::kMul:
        map2(o, x, y, scalar, count, [](V p, V q) { return p * q; });
        return 0;
      case BinaryOp::kDiv:
        map2(o, x, y, scalar, count, [](V p, V q) { return p / q; });
        return 0;
    }
    return args.fail("has no operation %lld", static_cast<long long>(op));
  });
}

TORCHPLUG_KERNEL torchplug_unary(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  const void* in = args.pointer();
  return with_unary_op(args, [&](auto element, int64_t count, UnaryOp op) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    auto* o = static_cast<T*>(out);
    const auto* x = static_cast<const T*>(in);
    return with_constant_op(op, [&](auto constant) {
      for (int64_t i = 0; i < count; ++i) {
        o[i] = C::store(apply_unary(constant.value, C::load(x[i])));
      }
      return 0;
    });
  });
}

TORCHPLUG_KERNEL torchplug_unary_backward(const TPD_KernelArg* argv, size_t argc, char* message,
                                          size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* grad_in = args.pointer();
  const void* grad_out = args.pointer();
  const void* saved = args.pointer();
  return with_unary_op(args, [&](auto element, int64_t count, UnaryOp op) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    auto* o = static_cast<T*>(grad_in);
    const auto* g = static_cast<const T*>(grad_out);
    const auto* v = static_cast<const T*>(saved);
    return with_constant_op(op, [&](auto constant) {
      for (int64_t i = 0; i < count; ++i) {
        o[i] = C::store(apply_backward(constant.value, C::load(g[i]), C::load(v[i])));
      }
      return 0;
    });
  });
}
