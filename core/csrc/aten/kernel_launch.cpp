#include "aten/kernel_launch.h"

#include <algorithm>
#include <cstring>

#include <ATen/core/op_registration/adaption.h>

#include "aten/backend.h"
#include "aten/sync_debug.h"

namespace torchplug {

KernelLaunch::StreamOrder::StreamOrder(const char* name, c10::Device device, const LaunchOptions& options) {
  if (options.host_waits) {
    check_synchronizing_operation(device, name);
  }
  wait_for_current_stream(device);
  if (options.peer.has_value() && *options.peer != device) {
    wait_for_current_stream(*options.peer);
  }
}

KernelLaunch::KernelLaunch(const char* name, c10::Device device, const std::vector<const void*>& memory,
                           LaunchOptions options)
    : guard_(device), order_(name, device, options), access_(memory), activity_(name, device, options.kind) {}

std::vector<const void*> touched_memory(std::initializer_list<const at::Tensor*> tensors) {
  std::vector<const void*> memory;
  if (!runtime::strict_mode()) {
    return memory;
  }
  for (const at::Tensor* tensor : tensors) {
    if (tensor->defined() && !tensor->device().is_cpu() && tensor->has_storage()) {
      memory.push_back(tensor->storage().data());
    }
  }
  return memory;
}

namespace {

[[noreturn]] void different_devices(const char* op, c10::Device first, c10::Device second) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", first,
              " and ", second, "! (in ", op, "; move the tensors to one device with .to(device) first)");
}

}  // namespace

void KernelDevice::note(const at::Tensor& tensor) {
  if (!tensor.defined()) {
    return;
  }
  const c10::Device device = tensor.device();
  if (device.is_cpu()) {
    host_operand_ = host_operand_ || tensor.dim() > 0;
    return;
  }
  note(device);
}

void KernelDevice::note(const at::Tensor& tensor, const char* argument) {
  if (!tensor.defined()) {
    return;
  }
  if (!device_.has_value()) {
    device_ = tensor.device();
  } else if (*device_ != tensor.device()) {
    c10::impl::common_device_check_failure(*device_, tensor, op_, argument);
  }
}

void KernelDevice::note(c10::Device device) {
  if (!device_.has_value()) {
    device_ = device;
  } else if (*device_ != device) {
    different_devices(op_, *device_, device);
  }
}

c10::Device KernelDevice::device() const {
  TORCH_CHECK(device_.has_value() && !device_->is_cpu(), op_,
              " reached a simulated device without a device tensor or device argument.");
  if (host_operand_) {
    different_devices(op_, *device_, c10::Device(c10::kCPU));
  }
  return *device_;
}

void resize_storage_bytes(const c10::Storage& storage, size_t nbytes) {
  c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
  TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
  const c10::Device device = storage.device();
  c10::DataPtr fresh = [&] {
    const c10::DeviceGuard guard(device);  // the allocator serves the current device
    return impl->allocator()->allocate(nbytes);
  }();
  const size_t kept = std::min(nbytes, impl->nbytes());
  if (kept > 0) {
    std::vector<const void*> memory;
    if (runtime::strict_mode()) {
      memory = {fresh.get(), impl->data()};
    }
    const KernelLaunch launch("Memcpy DtoD", device, memory, {ActivityKind::kMemcpy});
    std::memcpy(fresh.get(), impl->data(), kept);
  }
  impl->set_data_ptr_noswap(std::move(fresh));
  impl->set_nbytes(nbytes);
}

}  // namespace torchplug
