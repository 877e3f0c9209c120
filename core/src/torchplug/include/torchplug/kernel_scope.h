#pragma once
// For the C++ kernels of a backend plugin built on torchplug: a kernel that
// loops over device memory on the host enters the device through the same
// kernel launch as the core's own kernels (see KernelScope below).
//
//   // once, in the extension module's PyInit function:
//   if (!torchplug::load_kernel_api()) return nullptr;
//
//   at::Tensor scale(const at::Tensor& x) {
//     at::Tensor y = at::empty_like(x);
//     torchplug::KernelScope scope("mylib::scale", x.device(), {x, y});
//     scale_loop(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());
//     return y;
//   }
//
// A kernel that writes tensors it did not allocate (in-place or out=
// variants) first checks their memory for overlap as the CPU's kernels do:
//
//   torchplug::check_no_overlap(/*inputs=*/{x}, /*outputs=*/{out});
//
// Build with the include directory `torchplug.get_include()` returns.
#include <functional>
#include <initializer_list>
#include <iterator>
#include <vector>

#include <ATen/MemoryOverlap.h>
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include "torchplug/kernel_api_load.h"

namespace torchplug {

using TensorList = std::initializer_list<std::reference_wrapper<const at::Tensor>>;

// Raises the error the CPU's kernels raise ("unsupported operation: some
// elements of the input tensor and the written-to tensor refer to a single
// memory location") when an output overlaps itself (an expanded view), or
// shares part of its memory with an input or another output. An output that
// is exactly one of the inputs (same memory, sizes and strides: in-place) is
// allowed, as on the CPU; an elementwise loop may read and write it.
// Undefined inputs (an absent optional argument) are skipped.
namespace detail {

// check_no_overlap over any ranges of tensors (the core's C table passes vectors).
template <typename Inputs, typename Outputs>
void check_no_overlap_among(const Inputs& inputs, const Outputs& outputs) {
  for (auto output = std::begin(outputs); output != std::end(outputs); ++output) {
    const at::Tensor& written = *output;
    at::assert_no_internal_overlap(written);
    for (const at::Tensor& input : inputs) {
      if (input.defined()) {
        at::assert_no_partial_overlap(written, input);
      }
    }
    for (auto other = std::next(output); other != std::end(outputs); ++other) {
      at::assert_no_overlap(written, *other);
    }
  }
}

}  // namespace detail

inline void check_no_overlap(TensorList inputs, TensorList outputs) { detail::check_no_overlap_among(inputs, outputs); }

// A kernel's stay on the device, through the core's kernel launch (the same
// one the core's own kernels take): the device is current, work queued on its
// current stream runs first, strict memory mode grants access to the tensors'
// memory, and torch.profiler shows the kernel as a device activity named
// `name`. Construct it after allocating the outputs and before the loop. A
// no-op for CPU tensors.
class KernelScope {
 public:
  KernelScope(const char* name, c10::Device device, TensorList tensors) { open(name, device, tensors); }

  // Kernels of plugins built before kernels were named show as "vendor kernel".
  KernelScope(c10::Device device, TensorList tensors) : KernelScope("vendor kernel", device, tensors) {}

  ~KernelScope() {
    if (scope_ != nullptr) {
      detail::loaded_kernel_api()->close_launch(scope_);
    }
  }

  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  template <typename Tensors>
  void open(const char* name, c10::Device device, const Tensors& tensors) {
    if (device.is_cpu()) {
      return;
    }
    const TorchplugKernelApi* api = detail::loaded_kernel_api();
    TORCH_CHECK(api != nullptr,
                "torchplug::KernelScope was used before torchplug::load_kernel_api(); call that in the "
                "extension module's PyInit function.");
    std::vector<const void*> pointers;
    pointers.reserve(tensors.size());
    for (const at::Tensor& tensor : tensors) {
      if (tensor.defined() && tensor.has_storage()) {
        pointers.push_back(tensor.storage().data());
      }
    }
    char error[512] = {};
    TORCH_CHECK(api->open_launch(name, static_cast<int>(device.type()), device.index(), pointers.data(),
                                 pointers.size(), &scope_, error, sizeof error) == 0,
                error);
  }

  void* scope_ = nullptr;
};

}  // namespace torchplug
