// The stubs are declared for every CPU capability libtorch was built with.
#include "kernels/dispatch_stubs.h"

#include "kernels/cpu_stub_slots.h"

#include <utility>

#include <ATen/native/Activation.h>
#include <ATen/native/BinaryOps.h>
#include <ATen/native/Fill.h>
#include <ATen/native/Lerp.h>
#include <ATen/native/PointwiseOps.h>
#include <ATen/native/Pow.h>
#include <ATen/native/ReduceOps.h>
#include <ATen/native/TensorCompare.h>
#include <ATen/native/UnaryOps.h>

namespace torchplug {
namespace {

template <auto& stub, typename FnPtr = typename std::remove_reference_t<decltype(stub)>::FnPtr>
struct CpuLoop;

template <auto& stub, typename Result, typename... Args>
struct CpuLoop<stub, Result (*)(Args...)> {
  static Result run(Args... args) { return stub(c10::DeviceType::CPU, std::forward<Args>(args)...); }
};

template <auto&... stubs>
void serve_from_cpu() {
  (stubs.set_privateuse1_dispatch_ptr(&CpuLoop<stubs>::run), ...);
}

}  // namespace

void serve_privateuse1_stubs_from_cpu() {
  namespace native = at::native;
  serve_from_cpu<native::pow_tensor_scalar_stub, native::rsqrt_stub, native::sqrt_stub, native::neg_stub,
                 native::exp_stub, native::log_stub, native::sin_stub, native::cos_stub, native::sigmoid_stub,
                 native::sigmoid_backward_stub, native::tanh_backward_stub, native::silu_stub,
                 native::silu_backward_stub, native::threshold_stub, native::mul_stub, native::div_true_stub,
                 native::lerp_kernel_scalar_weight, native::addcmul_stub, native::addcdiv_stub, native::fill_stub,
                 native::clamp_min_scalar_stub, native::sum_stub, native::tanh_stub, native::eq_stub,
                 native::isneginf_stub, native::and_stub>();
}

}  // namespace torchplug
