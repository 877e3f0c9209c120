#include "device/hooks.h"

#include <ATen/detail/HPUHooksInterface.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "backend/backend.h"
#include "device/generator.h"
#include "memory/host_allocator.h"
#include "launch/kernel_launch.h"

namespace torchplug {
namespace {

// The accelerator-hook methods every simulated device answers the same way,
// whichever hooks interface (PrivateUse1, HPU) torch reaches them through.
template <class Interface, c10::DeviceType kType>
struct SimulatedHooks : public Interface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return find_device_runtime(kType) != nullptr; }
  void init() const override {}

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(c10::Device(kType, device_index));
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(c10::Device(kType, device_index));
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const int index = device_runtime(kType).device_of(data);
    TORCH_CHECK(index >= 0, "Pointer ", data, " is not ", c10::DeviceTypeName(kType, true), " device memory.");
    return c10::Device(kType, static_cast<c10::DeviceIndex>(index));
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_host_pointer(data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &register_host_allocator(kType); }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    driver::DeviceRuntime* runtime = find_device_runtime(kType);
    return runtime != nullptr && runtime->initialized() && device_index < runtime->device_count();
  }

  c10::DeviceIndex deviceCount() const override {
    driver::DeviceRuntime* runtime = find_device_runtime(kType);
    return runtime == nullptr ? 0 : static_cast<c10::DeviceIndex>(runtime->device_count());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    translate_runtime_errors([&] { device_runtime(kType).set_current_device(device); });
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(device_runtime(kType).current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = getCurrentDevice();
    setCurrentDevice(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }
};

struct SimulatedPrivateUse1Hooks final
    : public SimulatedHooks<at::PrivateUse1HooksInterface, c10::DeviceType::PrivateUse1> {
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    resize_storage_bytes(storage, new_bytes);
  }
};

struct SimulatedHPUHooks final : public SimulatedHooks<at::HPUHooksInterface, c10::DeviceType::HPU> {
  bool hasHPU() const override { return true; }
};

}  // namespace

bool register_privateuse1_hooks() {
  static bool registered_here = false;
  if (registered_here) {
    return true;
  }
  if (at::isPrivateUse1HooksRegistered()) {
    return false;  // a second registration would abort the process
  }
  // Leaked on purpose: torch keeps the pointer for the life of the process.
  at::RegisterPrivateUse1HooksInterface(new SimulatedPrivateUse1Hooks());
  registered_here = true;
  return true;
}

bool register_hpu_hooks() {
  static bool registered_here = false;
  if (registered_here) {
    return true;
  }
  if (at::HPUHooksRegistry()->Has("HPUHooks")) {
    return false;  // another HPU integration is already in place
  }
  at::HPUHooksRegistry()->Register(
      "HPUHooks", [](at::HPUHooksArgs) -> std::unique_ptr<at::HPUHooksInterface> {
        return std::make_unique<SimulatedHPUHooks>();
      });
  registered_here = true;
  // torch caches its first lookup of the HPU hooks for the life of the process.
  TORCH_CHECK(at::detail::getHPUHooks().hasHPU(),
              "torch looked up the HPU hooks before the hpu backend loaded (e.g. torch.accelerator was "
              "queried first), so the device cannot be registered in this process. Import torch (or the "
              "backend) before querying torch.accelerator.");
  return true;
}

}  // namespace torchplug
