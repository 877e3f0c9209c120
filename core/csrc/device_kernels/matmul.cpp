// Matrix products: out = beta * bias + alpha * (a @ b), over strided operands.
//
// b is first packed into a dense (k x n) buffer of the compute type (so any
// layout and bfloat16 read alike); the product is then computed in tiles of
// kRows x kColumns kept in registers while p walks k, the inner loop over a
// tile's columns vectorising. The tile loop is compiled for AVX2 with FMA
// and for the baseline, picked at load time (target_clones), since the image
// is built for the oldest CPU the wheel supports.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

constexpr int64_t kRows = 4;
constexpr int64_t kColumns = 16;

struct Strided {
  const void* data;
  int64_t row;
  int64_t column;
};

// One tile: rows [i0, i0 + rows) and columns [j0, j0 + columns) of a @ packed,
// into `tile` (kRows x kColumns, row-major).
template <typename T, typename V>
__attribute__((always_inline)) inline void product_tile(V (&tile)[kRows][kColumns], const Strided& a,
                                                        const V* packed, int64_t n, int64_t k, int64_t i0,
                                                        int64_t rows, int64_t j0, int64_t columns) {
  using C = Compute<T>;
  const T* a_data = static_cast<const T*>(a.data);
  for (auto& row : tile) {
    for (V& value : row) {
      value = V(0);
    }
  }
  if (rows == kRows && columns == kColumns) {
    for (int64_t p = 0; p < k; ++p) {
      const V* b_row = packed + p * n + j0;
      for (int64_t r = 0; r < kRows; ++r) {
        const V left = C::load(a_data[(i0 + r) * a.row + p * a.column]);
        for (int64_t c = 0; c < kColumns; ++c) {
          tile[r][c] += left * b_row[c];
        }
      }
    }
    return;
  }
  for (int64_t p = 0; p < k; ++p) {
    const V* b_row = packed + p * n + j0;
    for (int64_t r = 0; r < rows; ++r) {
      const V left = C::load(a_data[(i0 + r) * a.row + p * a.column]);
      for (int64_t c = 0; c < columns; ++c) {
        tile[r][c] += left * b_row[c];
      }
    }
  }
}

// The whole product into `out`, with the bias and scales applied.
template <typename T, typename V>
__attribute__((always_inline)) inline void product(T* out, const Strided& a, const V* packed, const Strided& bias,
                                                   int64_t m, int64_t n, int64_t k, V keep, V scale) {
  using C = Compute<T>;
  const T* c = static_cast<const T*>(bias.data);
  V tile[kRows][kColumns];
  for (int64_t i0 = 0; i0 < m; i0 += kRows) {
    const int64_t rows = m - i0 < kRows ? m - i0 : kRows;
    for (int64_t j0 = 0; j0 < n; j0 += kColumns) {
      const int64_t columns = n - j0 < kColumns ? n - j0 : kColumns;
      product_tile<T, V>(tile, a, packed, n, k, i0, rows, j0, columns);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t col = 0; col < columns; ++col) {
          const int64_t i = i0 + r;
          const int64_t j = j0 + col;
          V value = scale * tile[r][col];
          if (c != nullptr && keep != V(0)) {
            value += keep * C::load(c[i * bias.row + j * bias.column]);
          }
          out[i * n + j] = C::store(value);
        }
      }
    }
  }
}

#define TORCHPLUG_PRODUCT_FOR(T, V)                                                                       \
  __attribute__((target_clones("arch=haswell", "default"))) void product_of(                           \
      T* out, const Strided& a, const V* packed, const Strided& bias, int64_t m, int64_t n, int64_t k, \
      V keep, V scale) {                                                                                \
    product<T, V>(out, a, packed, bias, m, n, k, keep, scale);                                          \
  }

TORCHPLUG_PRODUCT_FOR(float, float)
TORCHPLUG_PRODUCT_FOR(double, double)
TORCHPLUG_PRODUCT_FOR(BFloat16, float)
#undef TORCHPLUG_PRODUCT_FOR

}  // namespace
}  // namespace torchplug::device_kernels

using namespace torchplug::device_kernels;  // NOLINT(google-build-using-namespace): the exported kernel below

TORCHPLUG_KERNEL torchplug_gemm(const TPD_KernelArg* argv, size_t argc, char* message, size_t message_size) {
  KernelArgs args(argv, argc, message, message_size);
  void* out = args.pointer();
  Strided a{args.pointer(), 0, 0};
  Strided b{args.pointer(), 0, 0};
  Strided bias{args.pointer(), 0, 0};
  const int64_t m = args.integer();
  const int64_t n = args.integer();
  const int64_t k = args.integer();
  a.row = args.integer();
  a.column = args.integer();
  b.row = args.integer();
  b.column = args.integer();
  bias.row = args.integer();
  bias.column = args.integer();
  const int64_t dtype = args.integer();
  const double beta = args.number();
  const double alpha = args.number();
  if (!args.ok()) {
    return 1;
  }
  if (m < 0 || n < 0 || k < 0) {
    return args.fail("takes no negative size (m=%lld, n=%lld, k=%lld)", static_cast<long long>(m),
                     static_cast<long long>(n), static_cast<long long>(k));
  }
  return with_dtype(args, dtype, [&](auto element) {
    using T = typename decltype(element)::type;
    using C = Compute<T>;
    using V = typename C::type;
    const size_t packed_bytes = sizeof(V) * static_cast<size_t>(k) * static_cast<size_t>(n);
    V* packed = static_cast<V*>(std::malloc(packed_bytes > 0 ? packed_bytes : 1));
    if (packed == nullptr) {
      return args.fail("could not allocate %zu bytes of scratch memory", packed_bytes);
    }
    const T* b_data = static_cast<const T*>(b.data);
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) {
        packed[p * n + j] = C::load(b_data[p * b.row + j * b.column]);
      }
    }
    product_of(static_cast<T*>(out), a, packed, bias, m, n, k, static_cast<V>(beta), static_cast<V>(alpha));
    std::free(packed);
    return 0;
  });
}
