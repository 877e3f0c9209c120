#pragma once
// What every device kernel of the image does first: read its arguments (each
// checked for kind), pick the element type, and fail with a message instead of
// running on arguments it does not understand. No C++ library: the image
// links the C library alone (kernel_abi.h).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <tuple>
#include <type_traits>
#include <utility>

#include "device_kernels/kernel_abi.h"
#include "torchplug/driver.h"

// Defines the exported kernel `name` (TPD_HostElfKernel) with the body that
// follows, which reads its arguments from `args` and returns 0, or the
// status of args.fail(...).
#define TORCHPLUG_DEVICE_KERNEL(name)                                                                   \
  static int name##_body(torchplug::device_kernels::KernelArgs& args);                                  \
  extern "C" __attribute__((visibility("default"))) int name(const TPD_KernelArg* argv, size_t argc,   \
                                                             char* message, size_t message_size) {      \
    torchplug::device_kernels::KernelArgs args(argv, argc, message, message_size);                      \
    return name##_body(args);                                                                           \
  }                                                                                                     \
  static int name##_body(torchplug::device_kernels::KernelArgs& args)

namespace torchplug::device_kernels {

// bfloat16 as stored: the upper half of a float32, rounded to nearest even.
struct BFloat16 {
  uint16_t bits;
};

inline float widen(BFloat16 value) {
  const uint32_t bits = static_cast<uint32_t>(value.bits) << 16;
  float result;
  std::memcpy(&result, &bits, sizeof result);
  return result;
}

inline BFloat16 narrow(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof bits);
  if (std::isnan(value)) {
    return BFloat16{0x7fc0};
  }
  bits += 0x7fff + ((bits >> 16) & 1);
  return BFloat16{static_cast<uint16_t>(bits >> 16)};
}

// The arithmetic type of element type T: bfloat16 computes in float.
template <typename T>
struct Compute {
  using type = T;
  static T load(T value) { return value; }
  static T store(T value) { return value; }
};
template <>
struct Compute<BFloat16> {
  using type = float;
  static float load(BFloat16 value) { return widen(value); }
  static BFloat16 store(float value) { return narrow(value); }
};

// A kernel's arguments, read in order; the first mismatch is kept as the failure.
class KernelArgs {
 public:
  KernelArgs(const TPD_KernelArg* args, size_t count, char* message, size_t message_size)
      : args_(args), count_(count), message_(message), message_size_(message_size) {}

  // The next arguments, by the types asked for (void* and const void* a
  // pointer, const int64_t* a pointer to int64 elements, int64_t an int64,
  // double a float64), for a structured binding; ok() tells whether they were
  // there. A missing or mismatched one reads as null or zero.
  template <typename... Values>
  std::tuple<Values...> read() {
    // A braced list is evaluated left to right: the arguments are read in order.
    return std::tuple<Values...>{read_one<Values>()...};
  }
  // Whether the arguments were as the kernel reads them, all of them read.
  bool ok() {
    if (!failed_ && read_ != count_) {
      fail("takes %zu arguments, but %zu were passed", read_, count_);
    }
    return !failed_;
  }
  // ok(), for a kernel over elements of any type: `element_bytes` names
  // elements of at least one byte.
  bool ok_for_elements_of(int64_t element_bytes) {
    if (ok() && element_bytes < 1) {
      fail("takes elements of at least one byte, not %lld", static_cast<long long>(element_bytes));
    }
    return !failed_;
  }
  // Writes the failure message (printf-style; the driver names the kernel) and
  // returns the failing status.
  template <typename... Values>
  int fail(const char* format, Values... values) {
    if (!failed_) {
      failed_ = true;
      std::snprintf(message_, message_size_, format, values...);
    }
    return 1;
  }

 private:
  template <typename Value>
  Value read_one() {
    if constexpr (std::is_same_v<Value, int64_t>) {
      const TPD_KernelArg* arg = next(TPD_KERNEL_ARG_INT64, "an int64");
      return arg != nullptr ? arg->value.int64 : 0;
    } else if constexpr (std::is_same_v<Value, double>) {
      const TPD_KernelArg* arg = next(TPD_KERNEL_ARG_FLOAT64, "a float64");
      return arg != nullptr ? arg->value.float64 : 0.0;
    } else {
      static_assert(std::is_pointer_v<Value>, "a kernel argument is a pointer, an int64_t or a double");
      const TPD_KernelArg* arg = next(TPD_KERNEL_ARG_POINTER, "a pointer");
      return arg != nullptr ? static_cast<Value>(arg->value.pointer) : nullptr;
    }
  }

  const TPD_KernelArg* next(TPD_KernelArgKind kind, const char* what) {
    const size_t index = read_++;
    if (failed_) {
      return nullptr;
    }
    if (index >= count_) {
      fail("needs more than the %zu arguments passed", count_);
      return nullptr;
    }
    if (args_[index].kind != kind) {
      fail("takes %s as argument %zu", what, index);
      return nullptr;
    }
    return &args_[index];
  }

  const TPD_KernelArg* args_;
  size_t count_;
  char* message_;
  size_t message_size_;
  size_t read_ = 0;
  bool failed_ = false;
};

// An element type as a kernel's body sees it: `type` as stored, `value` as
// computed, and the conversions between them and from untyped pointers.
template <typename T>
struct Element {
  using type = T;
  using value = typename Compute<T>::type;
  static value load(T stored) { return Compute<T>::load(stored); }
  static T store(value computed) { return Compute<T>::store(computed); }
  static T* at(void* data) { return static_cast<T*>(data); }
  static const T* at(const void* data) { return static_cast<const T*>(data); }
};

// The C++ type of each DType, in its numbering.
using ElementTypes = std::tuple<float, double, BFloat16, bool, uint8_t, int8_t, int16_t, int32_t, int64_t>;
static_assert(std::tuple_size_v<ElementTypes> == kDTypeCount, "one C++ type per DType");

template <typename Result, typename Body, int64_t... Values>
Result with_constant_among(int64_t value, Result otherwise, Body& body, std::integer_sequence<int64_t, Values...>) {
  Result result = otherwise;
  (void)((value == Values && ((result = body(std::integral_constant<int64_t, Values>{})), true)) || ...);
  return result;
}

// Calls `body(std::integral_constant<int64_t, value>{})` for 0 <= value <
// Count, so the body is compiled once per value (an element type's
// loop, an operation inlined into it); `otherwise` for any other value.
template <int64_t Count, typename Result, typename Body>
Result with_constant(int64_t value, Result otherwise, Body&& body) {
  return with_constant_among(value, otherwise, body, std::make_integer_sequence<int64_t, Count>{});
}

// Calls `body(T{})` for the C++ type T of DType number `type` below Count
// (all of them by default); `otherwise` for any other number.
template <int64_t Count = kDTypeCount, typename Result, typename Body>
Result with_element_type(int64_t type, Result otherwise, Body&& body) {
  return with_constant<Count>(type, otherwise, [&](auto number) {
    return body(std::tuple_element_t<static_cast<size_t>(decltype(number)::value), ElementTypes>{});
  });
}

// A kernel's typed part: once its arguments are read and were as it reads
// them, calls `body(Element<T>{})` for the arithmetic element type T that
// `dtype` names. The failing status for arguments it did not understand or a
// type it does not take.
template <typename Body>
int with_dtype(KernelArgs& args, int64_t dtype, Body&& body) {
  if (!args.ok()) {
    return 1;
  }
  bool known = false;
  const int status = with_element_type<kArithmeticDTypeCount>(dtype, 1, [&](auto element) {
    known = true;
    return body(Element<decltype(element)>{});
  });
  return known ? status : args.fail("has no arithmetic element type %lld", static_cast<long long>(dtype));
}

}  // namespace torchplug::device_kernels
