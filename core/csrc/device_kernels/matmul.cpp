// Matrix products: out = beta * bias + alpha * (a @ b), over strided operands.
//
// b is first packed, in the arithmetic type and in panels of two vectors'
// worth of columns (zero-padded), so that the inner loop reads it
// contiguously whatever its strides and element type. Each panel is then
// multiplied by every tile of a's rows in turn (the panel stays in the cache
// while a streams past it), a tile's products held in vector registers
// across the whole k loop, each step broadcasting the tile's values of a
// against one panel row of b. The whole product is compiled for the baseline
// instruction set, for AVX2 with FMA and for AVX-512, each with the tile
// shape its register file holds, and the widest the CPU offers is chosen
// when the kernel runs (TORCHPLUG_DEVICE_KERNEL_ISA caps it).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "device_kernels/kernel_args.h"

namespace torchplug::device_kernels {
namespace {

// Caps the instruction set the products use, as ONEDNN_MAX_CPU_ISA caps oneDNN's.
constexpr const char kIsaVariable[] = "TORCHPLUG_DEVICE_KERNEL_ISA";

struct Strided {
  const void* data;
  int64_t row;
  int64_t column;
};

// A tile shape: vectors of kBytes, tiles of kRows rows by a panel of two vectors.
template <size_t kBytes, int64_t kTileRows>
struct Shape {
  static constexpr size_t kVectorBytes = kBytes;
  static constexpr int64_t kRows = kTileRows;
};
// 16 vector registers: 2 x kRows accumulators, two of b, one broadcast.
using Baseline = Shape<16, 4>;
using Avx2 = Shape<32, 6>;
// 32 vector registers.
using Avx512 = Shape<64, 8>;

template <typename V, typename S>
struct Tile {
  typedef V Vector __attribute__((vector_size(S::kVectorBytes)));
  static constexpr int64_t kLanes = S::kVectorBytes / sizeof(V);
  static constexpr int64_t kPanel = 2 * kLanes;
};

template <typename V, typename S>
int64_t panel_count(int64_t n) {
  return (n + Tile<V, S>::kPanel - 1) / Tile<V, S>::kPanel;
}

// b (k x n, strided, element type E) as panels of kPanel columns: panel q
// holds columns [q * kPanel, (q + 1) * kPanel) of every row, row after row;
// columns past n are zero. b is read along its shorter stride.
constexpr int64_t kPackBlock = 16;

template <typename E, typename S, typename V = typename E::value>
void pack_panels(V* packed, const Strided& b, int64_t k, int64_t n) {
  constexpr int64_t kPanel = Tile<V, S>::kPanel;
  const auto* data = E::at(b.data);
  const int64_t panels = panel_count<V, S>(n);
  const bool along_rows = b.column <= b.row;
  for (int64_t q = 0; q < panels; ++q) {
    V* panel = packed + q * k * kPanel;
    const int64_t columns = n - q * kPanel < kPanel ? n - q * kPanel : kPanel;
    if (columns < kPanel) {
      std::memset(static_cast<void*>(panel), 0, sizeof(V) * static_cast<size_t>(k * kPanel));
    }
    const auto* first = data + q * kPanel * b.column;
    if (along_rows) {
      for (int64_t p = 0; p < k; ++p) {
        for (int64_t c = 0; c < columns; ++c) {
          panel[p * kPanel + c] = E::load(first[p * b.row + c * b.column]);
        }
      }
    } else {
      // Along columns, in blocks of rows: a block's panel rows stay in the
      // cache while each column's run of it is read.
      for (int64_t p0 = 0; p0 < k; p0 += kPackBlock) {
        const int64_t p1 = p0 + kPackBlock < k ? p0 + kPackBlock : k;
        for (int64_t c = 0; c < columns; ++c) {
          for (int64_t p = p0; p < p1; ++p) {
            panel[p * kPanel + c] = E::load(first[p * b.row + c * b.column]);
          }
        }
      }
    }
  }
}

// The products of kTileRows rows of a from row i against panel q, scaled by
// alpha and with beta * bias added, stored into out.
template <typename E, typename S, int64_t kTileRows, typename V = typename E::value>
inline __attribute__((always_inline)) void row_tile(typename E::type* out, const Strided& a, const V* panel, int64_t q,
                                                    const Strided& bias, int64_t i, int64_t n, int64_t k, V alpha,
                                                    V beta) {
  using Vector = typename Tile<V, S>::Vector;
  constexpr int64_t kLanes = Tile<V, S>::kLanes;
  constexpr int64_t kPanel = Tile<V, S>::kPanel;
  const auto* a_data = E::at(a.data) + i * a.row;
  Vector low[kTileRows] = {};
  Vector high[kTileRows] = {};
  for (int64_t p = 0; p < k; ++p) {
    Vector b_low, b_high;
    std::memcpy(&b_low, panel + p * kPanel, sizeof b_low);
    std::memcpy(&b_high, panel + p * kPanel + kLanes, sizeof b_high);
    for (int64_t r = 0; r < kTileRows; ++r) {
      const V value = E::load(a_data[r * a.row + p * a.column]);
      low[r] += value * b_low;
      high[r] += value * b_high;
    }
  }
  const auto* bias_data = E::at(bias.data);
  const bool with_bias = bias_data != nullptr && beta != V(0);
  if constexpr (std::is_same_v<typename E::type, V>) {
    // A whole panel's columns, stored by vector.
    if ((q + 1) * kPanel <= n && (!with_bias || bias.column == 1)) {
      for (int64_t r = 0; r < kTileRows; ++r) {
        V* out_row = out + (i + r) * n + q * kPanel;
        Vector results[2] = {alpha * low[r], alpha * high[r]};
        for (int64_t half = 0; half < 2; ++half) {
          if (with_bias) {
            Vector bias_values;
            std::memcpy(&bias_values, bias_data + (i + r) * bias.row + q * kPanel + half * kLanes, sizeof bias_values);
            results[half] += beta * bias_values;
          }
          std::memcpy(out_row + half * kLanes, &results[half], sizeof results[half]);
        }
      }
      return;
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
      if (with_bias) {
        result += beta * E::load(bias_data[(i + r) * bias.row + j * bias.column]);
      }
      out_row[j] = E::store(result);
    }
  }
}

// The last `rows` (fewer than a tile's) rows from row i, as one tile of that height.
template <typename E, typename S, int64_t kTileRows, typename V = typename E::value>
inline __attribute__((always_inline)) void remainder_tile(int64_t rows, typename E::type* out, const Strided& a,
                                                          const V* panel, int64_t q, const Strided& bias, int64_t i,
                                                          int64_t n, int64_t k, V alpha, V beta) {
  if constexpr (kTileRows > 0) {
    if (rows == kTileRows) {
      row_tile<E, S, kTileRows>(out, a, panel, q, bias, i, n, k, alpha, beta);
    } else {
      remainder_tile<E, S, kTileRows - 1>(rows, out, a, panel, q, bias, i, n, k, alpha, beta);
    }
  }
}

template <typename E, typename S, typename V = typename E::value>
inline __attribute__((always_inline)) void product_body(typename E::type* out, const Strided& a, const V* packed,
                                                        const Strided& bias, int64_t m, int64_t n, int64_t k, V alpha,
                                                        V beta) {
  constexpr int64_t kRows = S::kRows;
  const int64_t panels = panel_count<V, S>(n);
  for (int64_t q = 0; q < panels; ++q) {
    const V* panel = packed + q * k * Tile<V, S>::kPanel;
    int64_t i = 0;
    for (; i + kRows <= m; i += kRows) {
      row_tile<E, S, kRows>(out, a, panel, q, bias, i, n, k, alpha, beta);
    }
    remainder_tile<E, S, kRows - 1>(m - i, out, a, panel, q, bias, i, n, k, alpha, beta);
  }
}

// The product with tiles of shape S: packs b, then multiplies. False when the
// scratch memory for the packed b could not be allocated.
template <typename E, typename S, typename V = typename E::value>
inline __attribute__((always_inline)) bool product(typename E::type* out, const Strided& a, const Strided& b,
                                                   const Strided& bias, int64_t m, int64_t n, int64_t k, V alpha,
                                                   V beta) {
  const size_t bytes = sizeof(V) * static_cast<size_t>(panel_count<V, S>(n) * Tile<V, S>::kPanel) *
                       static_cast<size_t>(k > 0 ? k : 1);
  auto* packed = static_cast<V*>(__builtin_malloc(bytes));
  if (packed == nullptr) {
    return false;
  }
  pack_panels<E, S>(packed, b, k, n);
  product_body<E, S>(out, a, packed, bias, m, n, k, alpha, beta);
  __builtin_free(packed);
  return true;
}

template <typename E, typename V = typename E::value>
bool product_baseline(typename E::type* out, const Strided& a, const Strided& b, const Strided& bias, int64_t m,
                      int64_t n, int64_t k, V alpha, V beta) {
  return product<E, Baseline>(out, a, b, bias, m, n, k, alpha, beta);
}

template <typename E, typename V = typename E::value>
__attribute__((target("avx2,fma"))) bool product_avx2(typename E::type* out, const Strided& a, const Strided& b,
                                                      const Strided& bias, int64_t m, int64_t n, int64_t k, V alpha,
                                                      V beta) {
  return product<E, Avx2>(out, a, b, bias, m, n, k, alpha, beta);
}

template <typename E, typename V = typename E::value>
__attribute__((target("avx512f,avx2,fma"))) bool product_avx512(typename E::type* out, const Strided& a,
                                                                const Strided& b, const Strided& bias, int64_t m,
                                                                int64_t n, int64_t k, V alpha, V beta) {
  return product<E, Avx512>(out, a, b, bias, m, n, k, alpha, beta);
}

enum class Isa { kBaseline, kAvx2, kAvx512 };

// The widest instruction set this CPU offers, or none when
// TORCHPLUG_DEVICE_KERNEL_ISA names none of them. Asked at each product (a
// read of libgcc's record once it is filled, and of the environment): no
// function-local static, whose guard would need the C++ runtime.
bool usable_isa(Isa& isa) {
  __builtin_cpu_init();
  const Isa widest = __builtin_cpu_supports("avx512f")                                   ? Isa::kAvx512
                     : __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? Isa::kAvx2
                                                                                       : Isa::kBaseline;
  const char* cap = std::getenv(kIsaVariable);
  if (cap == nullptr || *cap == '\0') {
    isa = widest;
    return true;
  }
  Isa capped;
  if (std::strcmp(cap, "baseline") == 0) {
    capped = Isa::kBaseline;
  } else if (std::strcmp(cap, "avx2") == 0) {
    capped = Isa::kAvx2;
  } else if (std::strcmp(cap, "avx512") == 0) {
    capped = Isa::kAvx512;
  } else {
    return false;
  }
  isa = capped < widest ? capped : widest;
  return true;
}

}  // namespace

TORCHPLUG_DEVICE_KERNEL(torchplug_gemm_batched) {
  const auto [out, a_data, b_data, batch, m, n, k, a_batch, a_row, a_column, b_batch, b_row, b_column, dtype] =
      args.read<void*, const void*, const void*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                int64_t, int64_t, int64_t, int64_t>();
  if (args.ok() && (batch < 0 || m < 0 || n < 0 || k < 0)) {
    return args.fail("takes no negative size (batch=%lld, m=%lld, n=%lld, k=%lld)", static_cast<long long>(batch),
                     static_cast<long long>(m), static_cast<long long>(n), static_cast<long long>(k));
  }
  return with_dtype(args, dtype, [&](auto element) {
    using E = decltype(element);
    using V = typename E::value;
    using T = typename E::type;
    Isa isa;
    if (!usable_isa(isa)) {
      return args.fail("found %s=%s, which is none of baseline, avx2, avx512 (unset it to use the CPU's widest)",
                       kIsaVariable, std::getenv(kIsaVariable));
    }
    const Strided no_bias{nullptr, 0, 0};
    for (int64_t entry = 0; entry < batch; ++entry) {
      T* destination = E::at(out) + entry * m * n;
      const Strided a{E::at(a_data) + entry * a_batch, a_row, a_column};
      const Strided b{E::at(b_data) + entry * b_batch, b_row, b_column};
      const bool done =
          isa == Isa::kAvx512 ? product_avx512<E>(destination, a, b, no_bias, m, n, k, V(1), V(0))
          : isa == Isa::kAvx2 ? product_avx2<E>(destination, a, b, no_bias, m, n, k, V(1), V(0))
                              : product_baseline<E>(destination, a, b, no_bias, m, n, k, V(1), V(0));
      if (!done) {
        return args.fail("could not allocate scratch memory for a %lld x %lld operand", static_cast<long long>(k),
                         static_cast<long long>(n));
      }
    }
    return 0;
  });
}

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
    Isa isa;
    if (!usable_isa(isa)) {
      return args.fail("found %s=%s, which is none of baseline, avx2, avx512 (unset it to use the CPU's widest)",
                       kIsaVariable, std::getenv(kIsaVariable));
    }
    auto* destination = E::at(out);
    const V scale = static_cast<V>(alpha);
    const V bias_scale = static_cast<V>(beta);
    const bool done = isa == Isa::kAvx512 ? product_avx512<E>(destination, a, b, bias, m, n, k, scale, bias_scale)
                      : isa == Isa::kAvx2 ? product_avx2<E>(destination, a, b, bias, m, n, k, scale, bias_scale)
                                          : product_baseline<E>(destination, a, b, bias, m, n, k, scale, bias_scale);
    return done ? 0
                : args.fail("could not allocate scratch memory for a %lld x %lld operand", static_cast<long long>(k),
                            static_cast<long long>(n));
  });
}

}  // namespace torchplug::device_kernels
