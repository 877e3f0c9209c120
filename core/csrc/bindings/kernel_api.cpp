#include "bindings/kernel_api.h"

#include <cstdio>
#include <exception>
#include <functional>
#include <vector>

#include <ATen/native/Resize.h>
#include <torch/csrc/inductor/aoti_torch/utils.h>

#include "driver/memory_access.h"
#include "launch/kernel_launch.h"
#include "torchplug/kernel_api.h"
#include "torchplug/kernel_scope.h"

namespace torchplug {
namespace {

// Runs `body`, turning any exception into -1 and its message in `error`:
// nothing may cross the C table into a plugin.
template <typename Body>
int reporting_failures(char* error, size_t error_size, Body&& body) noexcept {
  try {
    body();
    return 0;
  } catch (const std::exception& failure) {
    std::snprintf(error, error_size, "%s", failure.what());
  } catch (...) {
    std::snprintf(error, error_size, "%s", "unknown error");
  }
  return -1;
}

int open_access(const void* const* pointers, size_t count, void** scope, char* error, size_t error_size) {
  *scope = nullptr;
  if (!driver::strict_memory()) {
    return 0;
  }
  return reporting_failures(error, error_size, [&] {
    *scope = new driver::MemoryAccess(std::vector<const void*>(pointers, pointers + count));
  });
}

void close_access(void* scope) noexcept {
  delete static_cast<driver::MemoryAccess*>(scope);
}

int open_launch(const char* name, int device_type, int device_index, const void* const* pointers, size_t count,
                void** scope, char* error, size_t error_size) {
  *scope = nullptr;
  return reporting_failures(error, error_size, [&] {
    const c10::Device device(static_cast<c10::DeviceType>(device_type), static_cast<c10::DeviceIndex>(device_index));
    std::vector<const void*> memory;
    if (driver::strict_memory()) {
      memory.assign(pointers, pointers + count);
    }
    *scope = new KernelLaunch(name, device, memory);
  });
}

void close_launch(void* scope) noexcept { delete static_cast<KernelLaunch*>(scope); }

const at::Tensor& tensor_of(void* handle) {
  return *torch::aot_inductor::tensor_handle_to_tensor_pointer(static_cast<AtenTensorHandle>(handle));
}

std::vector<std::reference_wrapper<const at::Tensor>> tensors_of(void* const* handles, size_t count) {
  std::vector<std::reference_wrapper<const at::Tensor>> tensors;
  for (size_t i = 0; i < count; ++i) {
    if (handles[i] != nullptr) {
      tensors.emplace_back(tensor_of(handles[i]));
    }
  }
  return tensors;
}

int check_no_overlap(void* const* inputs, size_t input_count, void* const* outputs, size_t output_count, char* error,
                     size_t error_size) {
  return reporting_failures(error, error_size, [&] {
    detail::check_no_overlap_among(tensors_of(inputs, input_count), tensors_of(outputs, output_count));
  });
}

int resize_output(void* out, const int64_t* sizes, size_t dims, char* error, size_t error_size) {
  return reporting_failures(error, error_size,
                            [&] { at::native::resize_output(tensor_of(out), c10::IntArrayRef(sizes, dims)); });
}

int device_name(int device_type, int device_index, char* name, size_t name_size, char* error,
                size_t error_size) {
  return reporting_failures(error, error_size, [&] {
    const c10::Device device(static_cast<c10::DeviceType>(device_type), static_cast<c10::DeviceIndex>(device_index));
    std::snprintf(name, name_size, "%s", device.str().c_str());
  });
}

const TorchplugKernelApi kernel_api_table{TORCHPLUG_KERNEL_API_VERSION,
                                          &open_access,
                                          &close_access,
                                          &open_launch,
                                          &close_launch,
                                          &check_no_overlap,
                                          &resize_output,
                                          &device_name};

}  // namespace

pybind11::capsule kernel_api_capsule() {
  return pybind11::capsule(const_cast<TorchplugKernelApi*>(&kernel_api_table), TORCHPLUG_KERNEL_API_CAPSULE);
}

}  // namespace torchplug
