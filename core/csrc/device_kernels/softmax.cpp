// Softmax and log-softmax over the last dimension, and their gradients.
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

// The rest of a softmax kernel's arguments after its pointers (rows, columns,
// dtype, log): runs `body(Element<T>{}, rows, columns, log)`.
template <typename Body>
int with_rows(KernelArgs& args, Body&& body) {
  const int64_t rows = args.integer();
  const int64_t columns = args.integer();
  const int64_t dtype = args.integer();
  const bool log = args.integer() != 0;
  if (!args.ok()) {
    return 1;
  }
  return with_dtype(args, dtype, [&](auto element) { return body(element, rows, columns, log); });
}

}  // namespace
}  // namespace torchplug::device_kernels

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernels below

TORCHPLUG_KERNEL torchplug_softmax(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  const void* in = args.pointer();
  return with_rows(args, [&](auto element, int64_t rows, int64_t columns, bool log) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    using V = typename C::type;
    for (int64_t r = 0; r < rows; ++r) {
      const T* x = static_cast<const T*>(in) + r * columns;
      T* y = static_cast<T*>(out) + r * columns;
      V largest = -INFINITY;
      for (int64_t j = 0; j < columns; ++j) {
        const V value = C::load(x[j]);
        largest = value > largest || std::isnan(value) ? value : largest;
      }
      V total = V(0);
      for (int64_t j = 0; j < columns; ++j) {
        total += std::exp(C::load(x[j]) - largest);
      }
      if (log) {
        const V shift = largest + std::log(total);
        for (int64_t j = 0; j < columns; ++j) {
          y[j] = C::store(C::load(x[j]) - shift);
        }
      } else {
        for (int64_t j = 0; j < columns; ++j) {
          y[j] = C::store(std::exp(C::load(x[j]) - largest) / total);
        }
      }
    }
    return 0;
  });
}

TORCHPLUG_KERNEL torchplug_softmax_backward(const TPD_KernelArg* argv, size_t argc, char* message,
                                            size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* grad_in = args.pointer();
  const void* grad_out = args.pointer();
  const void* out = args.pointer();
  return with_rows(args, [&](auto element, int64_t rows, int64_t columns, bool log) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    using V = typename C::type;
    for (int64_t r = 0; r < rows; ++r) {
      const T* g = static_cast<const T*>(grad_out) + r * columns;
      const T* y = static_cast<const T*>(out) + r * columns;
      T* d = static_cast<T*>(grad_in) + r * columns;
      V total = V(0);
      for (int64_t j = 0; j < columns; ++j) {
        total += log ? C::load(g[j]) : C::load(g[j]) * C::load(y[j]);
      }
      for (int64_t j = 0; j < columns; ++j) {
        const V grad = C::load(g[j]);
        d[j] = C::store(log ? grad - std::exp(C::load(y[j])) * total : C::load(y[j]) * (grad - total));
      }
    }
    return 0;
  });
}
