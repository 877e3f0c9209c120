#pragma once
// For the C++ kernels of a backend plugin written against torch's stable ABI
// (torch/csrc/stable): built once, they load into every torch release the
// core supports. The same services as torchplug/kernel_scope.h, over
// torch::stable::Tensor, through the core's C table alone:
//
//   // once, in the extension module's PyInit function:
//   if (!torchplug::load_kernel_api()) return nullptr;
//
//   torch::stable::Tensor scale(const torch::stable::Tensor& x) {
//     torch::stable::Tensor y = torch::stable::empty_like(x);
//     torchplug::stable::KernelScope scope("mylib::scale", x, {x, y});
//     scale_loop(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel());
//     return y;
//   }
//
// Build with torchplug_add_extension(... STABLE_ABI ...), which refuses a
// module that still calls torch's C++ API.
#include <cstddef>
#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>
#include <torch/headeronly/util/HeaderOnlyArrayRef.h>

#include "torchplug/kernel_api_load.h"

namespace torchplug::stable {

using Tensor = torch::stable::Tensor;
using TensorList = std::initializer_list<std::reference_wrapper<const Tensor>>;

namespace detail {

// The loaded table, checked to offer what these functions call.
inline const TorchplugKernelApi& kernel_api() {
  const TorchplugKernelApi* api = torchplug::detail::loaded_kernel_api();
  STD_TORCH_CHECK(api != nullptr,
                  "torchplug's kernel API was used before torchplug::load_kernel_api(); call that in the "
                  "extension module's PyInit function.");
  return *api;
}

// Throws the core's message when a call of the table failed.
inline void check(int status, const char* error) { STD_TORCH_CHECK(status == 0, error); }

inline std::vector<void*> handles_of(TensorList tensors) {
  std::vector<void*> handles;
  handles.reserve(tensors.size());
  for (const Tensor& tensor : tensors) {
    handles.push_back(tensor.defined() ? static_cast<void*>(tensor.get()) : nullptr);
  }
  return handles;
}

}  // namespace detail

// As torchplug::check_no_overlap: the error the CPU's kernels raise when an
// output overlaps itself, an input (other than exactly, in place) or
// another output. Undefined inputs are skipped.
inline void check_no_overlap(TensorList inputs, TensorList outputs) {
  const std::vector<void*> in = detail::handles_of(inputs);
  const std::vector<void*> out = detail::handles_of(outputs);
  char error[512] = {};
  detail::check(
      detail::kernel_api().check_no_overlap(in.data(), in.size(), out.data(), out.size(), error, sizeof error),
      error);
}

// Resizes the out= argument `out` to `sizes` as torch's out= kernels do.
inline void resize_output(const Tensor& out, torch::headeronly::IntHeaderOnlyArrayRef sizes) {
  char error[512] = {};
  detail::check(detail::kernel_api().resize_output(out.get(), sizes.data(), sizes.size(), error, sizeof error),
                error);
}

// The name torch prints for `tensor`'s device ("npu:0", "cpu"), for messages.
inline std::string device_name(const Tensor& tensor) {
  const torch::stable::Device device = tensor.device();
  char name[64] = {};
  char error[512] = {};
  detail::check(detail::kernel_api().device_name(static_cast<int>(device.type()), device.index(), name, sizeof name,
                                                 error, sizeof error),
                error);
  return name;
}

// As torchplug::KernelScope: a kernel's stay on the device of `on` (the
// device current, its stream's queued work first, the tensors' memory
// accessible in strict memory mode, the kernel shown by torch.profiler as
// `name`). Construct it after allocating the outputs and before the loop;
// a no-op for CPU tensors.
//
// The second form takes the device and the operands' data pointers a kernel
// has already read: each accessor of torch::stable::Tensor is a call into
// torch, which a kernel over a few elements notices.
//
//   const torch::stable::Device device = x.device();
//   const float* in = x.const_data_ptr<float>();
//   float* out = y.mutable_data_ptr<float>();
//   torchplug::stable::KernelScope scope("mylib::scale", device, {in, out});
class KernelScope {
 public:
  KernelScope(const char* name, const Tensor& on, TensorList tensors) {
    if (on.is_cpu()) {
      return;
    }
    std::vector<const void*> pointers;
    pointers.reserve(tensors.size());
    for (const Tensor& tensor : tensors) {
      if (tensor.defined() && tensor.has_storage()) {
        pointers.push_back(tensor.const_data_ptr());
      }
    }
    open(name, on.device(), pointers.data(), pointers.size());
  }

  KernelScope(const char* name, const torch::stable::Device& device, std::initializer_list<const void*> memory) {
    if (device.type() != torch::headeronly::DeviceType::CPU) {
      open(name, device, memory.begin(), memory.size());
    }
  }

  ~KernelScope() {
    if (scope_ != nullptr) {
      detail::kernel_api().close_launch(scope_);
    }
  }

  KernelScope(const KernelScope&) = delete;
  KernelScope& operator=(const KernelScope&) = delete;

 private:
  void open(const char* name, const torch::stable::Device& device, const void* const* memory, size_t count) {
    char error[512] = {};
    detail::check(detail::kernel_api().open_launch(name, static_cast<int>(device.type()), device.index(), memory,
                                                   count, &scope_, error, sizeof error),
                  error);
  }

  void* scope_ = nullptr;
};

}  // namespace torchplug::stable
