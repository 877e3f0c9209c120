#include "aten/hooks.h"

#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/Storage.h>

#include "aten/backend.h"
#include "aten/generator.h"
#include "aten/host_allocator.h"

namespace torchplug {
namespace {

constexpr c10::DeviceType kType = c10::DeviceType::PrivateUse1;

struct SimulatedPrivateUse1Hooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return find_platform(kType) != nullptr; }
  void init() const override {}

  const at::Generator& getDefaultGenerator(c10::DeviceIndex device_index) const override {
    return default_generator(c10::Device(kType, device_index));
  }
  at::Generator getNewGenerator(c10::DeviceIndex device_index) const override {
    return new_generator(c10::Device(kType, device_index));
  }

  at::Device getDeviceFromPtr(void* data) const override {
    const int index = platform_for(kType).device_of(data);
    TORCH_CHECK(index >= 0, "Pointer ", data, " is not ", c10::get_privateuse1_backend(), " device memory.");
    return c10::Device(kType, static_cast<c10::DeviceIndex>(index));
  }

  bool isPinnedPtr(const void* data) const override { return is_pinned_host_pointer(kType, data); }
  at::Allocator* getPinnedMemoryAllocator() const override { return &register_host_allocator(kType); }
  bool hasPrimaryContext(c10::DeviceIndex device_index) const override {
    runtime::Platform* platform = find_platform(kType);
    return platform != nullptr && platform->initialized() && device_index < platform->device_count();
  }

  c10::DeviceIndex deviceCount() const override {
    runtime::Platform* platform = find_platform(kType);
    return platform == nullptr ? 0 : static_cast<c10::DeviceIndex>(platform->device_count());
  }
  void setCurrentDevice(c10::DeviceIndex device) const override {
    translate_runtime_errors([&] { platform_for(kType).set_current_device(device); });
  }
  c10::DeviceIndex getCurrentDevice() const override {
    return static_cast<c10::DeviceIndex>(platform_for(kType).current_device());
  }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex device) const override {
    const c10::DeviceIndex previous = getCurrentDevice();
    setCurrentDevice(device);
    return previous;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex device) const override {
    return exchangeDevice(device);
  }

  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t new_bytes) const override {
    c10::StorageImpl* impl = storage.unsafeGetStorageImpl();
    TORCH_CHECK(impl->resizable(), "Trying to resize storage that is not resizable");
    c10::DataPtr fresh = impl->allocator()->allocate(new_bytes);
    const size_t keep = std::min(new_bytes, impl->nbytes());
    if (keep > 0) {
      platform_for(kType).memcpy(fresh.get(), impl->data(), keep);
    }
    impl->set_data_ptr_noswap(std::move(fresh));
    impl->set_nbytes(new_bytes);
  }
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

}  // namespace torchplug
