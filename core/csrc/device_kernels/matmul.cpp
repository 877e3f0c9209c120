// Matrix products: out = beta * bias + alpha * (a @ b), over strided operands.
//
// b is first packed, in the arithmetic type and in panels of kPanel columns
// (zero-padded), so that the inner loop reads it contiguously whatever its
// strides and element type; the product is then computed in tiles of kRows
// rows by one panel held in vector registers across the whole k loop, each
// step broadcasting kRows values of a against one panel row of b. The tile
// loop is compiled twice, for the baseline instruction set and for AVX2 with
// FMA, chosen when the kernel runs.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

struct Strided {
  const void* data;
  int64_t row;
  int64_t column;
};

constexpr int64_t kRows = 4;
constexpr size_t kVectorBytes = 32;

template <typename V>
struct Tile {
  // One vector: kVectorBytes of V; a panel is two of them.
  typedef V Vector __attribute__((vector_size(kVectorBytes)));
  static constexpr int64_t kLanes = kVectorBytes / sizeof(V);
  static constexpr int64_t kPanel = 2 * kLanes;
};

// b (k x n, strided, element type E) as panels of Tile<V>::kPanel columns:
// panel q holds columns [q * kPanel, (q + 1) * kPanel) of every row, row after
// row; columns past n are zero.
template <typename E, typename V = typename E::value>
void pack_panels(V* packed, const Strided& b, int64_t k, int64_t n) {
  constexpr int64_t kPanel = Tile<V>::kPanel;
  const auto* data = E::at(b.data);
  const int64_t panels = (n + kPanel - 1) / kPanel;
  for (int64_t q = 0; q < panels; ++q) {
    V* panel = packed + q * k * kPanel;
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t j = q * kPanel + c;
        panel[p * kPanel + c] = j < n ? E::load(data[p * b.row + j * b.column]) : V(0);
      }
    }
  }
}

// The products of `rows` (1 .. kRows) rows of a from row i against every
// panel, scaled by alpha and with beta * bias added, stored into out.
template <typename E, int64_t kTileRows, typename V = typename E::value>
inline __attribute__((always_inline)) void row_tile(typename E::type* out, const Strided& a, const V* packed,
                                                    const Strided& bias, int64_t i, int64_t n, int64_t k, V alpha,
                                                    V beta) {
  using Vector = typename Tile<V>::Vector;
  constexpr int64_t kLanes = Tile<V>::kLanes;
  constexpr int64_t kPanel = Tile<V>::kPanel;
  const auto* a_data = E::at(a.data);
  const auto* bias_data = E::at(bias.data);
  const int64_t panels = (n + kPanel - 1) / kPanel;
  for (int64_t q = 0; q < panels; ++q) {
    const V* panel = packed + q * k * kPanel;
    Vector low[kTileRows] = {};
    Vector high[kTileRows] = {};
    for (int64_t p = 0; p < k; ++p) {
      Vector b_low, b_high;
      std::memcpy(&b_low, panel + p * kPanel, sizeof b_low);
      std::memcpy(&b_high, panel + p * kPanel + kLanes, sizeof b_high);
      for (int64_t r = 0; r < kTileRows; ++r) {
        const V value = E::load(a_data[(i + r) * a.row + p * a.column]);
        low[r] += value * b_low;
        high[r] += value * b_high;
      }
    }
    for (int64_t r = 0; r < kTileRows; ++r) {
      typename E::type* out_row = out + (i + r) * n;
      for (int64_t c = 0; c < kPanel; ++c) {
        const int64_t j = q * kPanel + c;
        if (j >= n) {
          break;
        }
        V result = alpha * (c < kLanes ? low[r][c] : high[r][c - kLanes]);
        if (bias_data != nullptr && beta != V(0)) {
          result += beta * E::load(bias_data[(i + r) * bias.row + j * bias.column]);
        }
        out_row[j] = E::store(result);
      }
    }
  }
}

template <typename E, typename V = typename E::value>
inline __attribute__((always_inline)) void product_body(typename E::type* out, const Strided& a, const V* packed,
                                                        const Strided& bias, int64_t m, int64_t n, int64_t k, V alpha,
                                                        V beta) {
  int64_t i = 0;
  for (; i + kRows <= m; i += kRows) {
    row_tile<E, kRows>(out, a, packed, bias, i, n, k, alpha, beta);
  }
  for (; i < m; ++i) {
    row_tile<E, 1>(out, a, packed, bias, i, n, k, alpha, beta);
  }
}

template <typename E, typename V = typename E::value>
void product_baseline(typename E::type* out, const Strided& a, const V* packed, const Strided& bias, int64_t m,
                      int64_t n, int64_t k, V alpha, V beta) {
  product_body<E>(out, a, packed, bias, m, n, k, alpha, beta);
}

template <typename E, typename V = typename E::value>
__attribute__((target("avx2,fma"))) void product_avx2(typename E::type* out, const Strided& a, const V* packed,
                                                      const Strided& bias, int64_t m, int64_t n, int64_t k, V alpha,
                                                      V beta) {
  product_body<E>(out, a, packed, bias, m, n, k, alpha, beta);
}

// Asked at each product (a read of libgcc's record, once it is filled): no
// function-local static, whose guard would need the C++ runtime.
bool has_avx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
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
    constexpr int64_t kPanel = Tile<V>::kPanel;
    const int64_t panels = (n + kPanel - 1) / kPanel;
    const size_t bytes = sizeof(V) * static_cast<size_t>(panels * kPanel) * static_cast<size_t>(k > 0 ? k : 1);
    auto* packed = static_cast<V*>(__builtin_malloc(bytes));
    if (packed == nullptr) {
      return args.fail("could not allocate %lld bytes of scratch memory", static_cast<long long>(bytes));
    }
    pack_panels<E>(packed, b, k, n);
    if (has_avx2()) {
      product_avx2<E>(E::at(out), a, packed, bias, m, n, k, static_cast<V>(alpha), static_cast<V>(beta));
    } else {
      product_baseline<E>(E::at(out), a, packed, bias, m, n, k, static_cast<V>(alpha), static_cast<V>(beta));
    }
    __builtin_free(packed);
    return 0;
  });
}
