#include "device/generator.h"

#include <array>
#include <memory>
#include <mutex>

#include <ATen/CPUGeneratorImpl.h>

#include <c10/core/TensorOptions.h>

#include "backend/backend.h"
#include "backend/device_types.h"

namespace torchplug {
namespace {

// A device generator is a device-labelled handle on a CPU engine: kernels run
// on the host and draw from the engine, while torch sees a generator of the
// device (seeded by torch.manual_seed, saved in RNG states, forked by fork_rng).
class DeviceGenerator final : public c10::GeneratorImpl {
 public:
  DeviceGenerator(c10::Device device, uint64_t seed)
      : c10::GeneratorImpl(device, backend(device.type()).dense_keys),
        engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  void set_current_seed(uint64_t seed) override { engine_.set_current_seed(seed); }
  void set_offset(uint64_t offset) override { engine_.set_offset(offset); }
  uint64_t get_offset() const override { return engine_.get_offset(); }
  uint64_t current_seed() const override { return engine_.current_seed(); }
  uint64_t seed() override { return engine_.seed(); }
  void set_state(const c10::TensorImpl& new_state) override {
    engine_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    return engine_.unsafeGetGeneratorImpl()->get_state();
  }
  const at::Generator& engine() const { return engine_; }

 private:
  DeviceGenerator* clone_impl() const override {
    auto* copy = new DeviceGenerator(device(), 0);
    copy->engine_ = engine_.clone();
    return copy;
  }

  at::Generator engine_;
};

std::mutex defaults_mutex;
PerDeviceType<std::array<std::unique_ptr<at::Generator>, driver::kMaxDevices>> defaults;

}  // namespace

const at::Generator& default_generator(c10::Device device) {
  const c10::DeviceIndex index = checked_device_index(device.type(), device.index());
  std::lock_guard<std::mutex> lock(defaults_mutex);
  auto& slot = defaults[static_cast<size_t>(device.type())][index];
  if (!slot) {
    slot = std::make_unique<at::Generator>(at::make_generator<DeviceGenerator>(
        c10::Device(device.type(), index), c10::default_rng_seed_val));
  }
  return *slot;
}

at::Generator new_generator(c10::Device device) {
  const c10::DeviceIndex index = checked_device_index(device.type(), device.index());
  return at::make_generator<DeviceGenerator>(c10::Device(device.type(), index),
                                             c10::detail::getNonDeterministicRandom());
}

at::Generator engine_of(const at::Generator& device_generator) {
  auto* impl = dynamic_cast<DeviceGenerator*>(device_generator.unsafeGetGeneratorImpl());
  TORCH_CHECK(impl != nullptr, "Generator of device ", device_generator.device(),
              " was not created by torchplug; pass a generator of the tensor's device.");
  return impl->engine();
}

}  // namespace torchplug
