// Matrix products: out = beta * bias + alpha * (a @ b), over strided operands.
#include <cstddef>
#include <cstdint>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

struct Strided {
  const void* data;
  int64_t row;
  int64_t column;
};

// Row i of the product, accumulated in `acc` (n values of V). The loop order
// follows b's layout so the inner loop walks memory contiguously: along b's
// rows when its columns are dense, else as dot products along its columns.
template <typename E, typename V = typename E::value>
void product_row(V* acc, const Strided& a, const Strided& b, int64_t i, int64_t n, int64_t k) {
  using T = typename E::type;
  const T* a_row = static_cast<const T*>(a.data) + i * a.row;
  const T* b_data = static_cast<const T*>(b.data);
  for (int64_t j = 0; j < n; ++j) {
    acc[j] = V(0);
  }
  if (b.column == 1) {
    for (int64_t p = 0; p < k; ++p) {
      const V left = E::load(a_row[p * a.column]);
      const T* b_row = b_data + p * b.row;
      for (int64_t j = 0; j < n; ++j) {
        acc[j] += left * E::load(b_row[j]);
      }
    }
    return;
  }
  for (int64_t j = 0; j < n; ++j) {
    const T* b_column = b_data + j * b.column;
    V sum0 = V(0), sum1 = V(0), sum2 = V(0), sum3 = V(0);
    int64_t p = 0;
    if (a.column == 1 && b.row == 1) {
      for (; p + 4 <= k; p += 4) {
        sum0 += E::load(a_row[p]) * E::load(b_column[p]);
        sum1 += E::load(a_row[p + 1]) * E::load(b_column[p + 1]);
        sum2 += E::load(a_row[p + 2]) * E::load(b_column[p + 2]);
        sum3 += E::load(a_row[p + 3]) * E::load(b_column[p + 3]);
      }
    }
    for (; p < k; ++p) {
      sum0 += E::load(a_row[p * a.column]) * E::load(b_column[p * b.row]);
    }
    acc[j] = (sum0 + sum1) + (sum2 + sum3);
  }
}

}  // namespace
}  // namespace torchplug::device_kernels

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernel below

TORCHPLUG_DEVICE_KERNEL(torchplug_gemm) {
  const auto [out, a_data, b_data, bias_data, m, n, k, a_row, a_column, b_row, b_column, bias_row, bias_column, dtype,
              beta, alpha] = args.read<void*, const void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t,
                                       int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, double, double>();
  const Strided a{a_data, a_row, a_column};
  const Strided b{b_data, b_row, b_column};
  const Strided bias{bias_data, bias_row, bias_column};
  if (args.ok() && (m < 0 || n < 0 || k < 0)) {
    return args.fail("takes no negative size (m=%lld, n=%lld, k=%lld)", static_cast<long long>(m),
                     static_cast<long long>(n), static_cast<long long>(k));
  }
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    using V = typename E::value;
    // The row's sums in a buffer of the stack for small rows, else of the heap.
    constexpr int64_t kStackColumns = 1024;
    V stack_row[kStackColumns];
    V* acc = stack_row;
    if (n > kStackColumns) {
      acc = static_cast<V*>(__builtin_malloc(sizeof(V) * static_cast<size_t>(n)));
      if (acc == nullptr) {
        return args.fail("could not allocate %lld bytes of scratch memory", static_cast<long long>(sizeof(V) * n));
      }
    }
    const auto* c = E::at(bias.data);
    const V scale = static_cast<V>(alpha);
    const V keep = static_cast<V>(beta);
    for (int64_t i = 0; i < m; ++i) {
      product_row<E>(acc, a, b, i, n, k);
      auto* o_row = E::at(out) + i * n;
      for (int64_t j = 0; j < n; ++j) {
        V value = scale * acc[j];
        if (c != nullptr && keep != V(0)) {
          value += keep * E::load(c[i * bias.row + j * bias.column]);
        }
        o_row[j] = E::store(value);
      }
    }
    if (acc != stack_row) {
      __builtin_free(acc);
    }
    return 0;
  });
}
