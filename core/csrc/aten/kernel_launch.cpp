#include "aten/kernel_launch.h"

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

void different_devices(const char* op, c10::Device first, c10::Device second) {
  TORCH_CHECK(false, "Expected all tensors to be on the same device, but found at least two devices, ", first,
              " and ", second, "! (in ", op, "; move the tensors to one device with .to(device) first)");
}

}  // namespace torchplug
