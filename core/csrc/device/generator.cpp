#include "device/generator.h"

#include <array>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>

#include <ATen/CPUGeneratorImpl.h>

#include <c10/core/TensorOptions.h>

#include "backend/backend.h"
#include "backend/device_types.h"
#include "device/captured_draws.h"
#include "launch/sync_debug.h"
#include "launch/worker_thread.h"

namespace torchplug {
namespace {

// A device generator is a device-labelled handle on a CPU engine: kernels run
// on the host and draw from the engine, while torch sees a generator of the
// device (seeded by torch.manual_seed, saved in RNG states, forked by fork_rng).
// What reads or changes the engine's state from the host waits for the draws
// queued from it (generator.h).
class DeviceGenerator final : public c10::GeneratorImpl {
 public:
  DeviceGenerator(c10::Device device, uint64_t seed)
      : c10::GeneratorImpl(device, backend(device.type()).dense_keys),
        engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {}

  void set_current_seed(uint64_t seed) override {
    wait_for_queued_draws(HostWait::kRequested, "seeding its generator");
    engine_.set_current_seed(seed);
  }
  void set_offset(uint64_t offset) override {
    wait_for_queued_draws(HostWait::kRequested, "setting its generator's offset");
    engine_.set_offset(offset);
  }
  uint64_t get_offset() const override {
    wait_for_queued_draws(HostWait::kRequested, "reading its generator's offset");
    return engine_.get_offset();
  }
  uint64_t current_seed() const override { return engine_.current_seed(); }
  uint64_t seed() override {
    wait_for_queued_draws(HostWait::kRequested, "seeding its generator");
    return engine_.seed();
  }
  void set_state(const c10::TensorImpl& new_state) override {
    wait_for_queued_draws(HostWait::kRequested, "setting its generator's state");
    engine_.unsafeGetGeneratorImpl()->set_state(new_state);
  }
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override {
    wait_for_queued_draws(HostWait::kRequested, "reading its generator's state");
    return engine_.unsafeGetGeneratorImpl()->get_state();
  }
  // The engine, for a draw on the host now.
  const at::Generator& engine_now() const {
    wait_for_queued_draws(HostWait::kImplicit, "a random operator that runs on the host");
    return engine_;
  }

  // The engine as it is, for a draw a captured graph makes at its replays.
  const at::Generator& engine() const { return engine_; }

  std::optional<QueuedDraw> queue_draw(c10::Stream stream) {
    std::lock_guard<std::mutex> lock(draws_->mutex);
    if (draws_->pending > 0 && draws_->stream != stream) {
      return std::nullopt;
    }
    ++draws_->pending;
    draws_->stream = stream;
    std::shared_ptr<QueuedDraws> draws = draws_;
    auto done = [draws](void*) {
      std::lock_guard<std::mutex> lock(draws->mutex);
      if (--draws->pending == 0) {
        draws->all_done.notify_all();
      }
    };
    return QueuedDraw{engine_, std::shared_ptr<void>(nullptr, done)};
  }

 private:
  struct QueuedDraws {
    std::mutex mutex;
    std::condition_variable all_done;
    int pending = 0;
    std::optional<c10::Stream> stream;  // where the pending draws are queued
  };

  // A queued kernel never waits: its stream's earlier draws have run, in order.
  void wait_for_queued_draws(HostWait kind, const char* operation) const {
    if (on_stream_worker_thread()) {
      return;
    }
    std::unique_lock<std::mutex> lock(draws_->mutex);
    if (draws_->pending == 0) {
      return;
    }
    note_host_wait(device(), kind, operation);
    draws_->all_done.wait(lock, [this] { return draws_->pending == 0; });
  }

  DeviceGenerator* clone_impl() const override {
    wait_for_queued_draws(HostWait::kRequested, "cloning its generator");
    auto* copy = new DeviceGenerator(device(), 0);
    copy->engine_ = engine_.clone();
    return copy;
  }

  at::Generator engine_;
  // Shared with the queued draws, which may outlive the generator.
  std::shared_ptr<QueuedDraws> draws_ = std::make_shared<QueuedDraws>();
};

DeviceGenerator* device_generator_impl(const at::Generator& generator) {
  return dynamic_cast<DeviceGenerator*>(generator.unsafeGetGeneratorImpl());
}

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
  const DeviceGenerator* impl = device_generator_impl(device_generator);
  TORCH_CHECK(impl != nullptr, "Generator of device ", device_generator.device(),
              " was not created by torchplug; pass a generator of the tensor's device.");
  return impl->engine_now();
}

bool is_device_generator(const at::Generator& generator, c10::Device device) {
  return device_generator_impl(generator) != nullptr && generator.device() == device;
}

std::optional<QueuedDraw> queue_draw(const at::Generator& device_generator, c10::Stream stream) {
  DeviceGenerator* impl = device_generator_impl(device_generator);
  TORCH_INTERNAL_ASSERT(impl != nullptr, "queue_draw takes a torchplug device generator");
  if (note_captured_draw(stream, device_generator)) {
    return QueuedDraw{impl->engine(), nullptr};  // each replay reserves its draws (device/graph.cpp)
  }
  return impl->queue_draw(stream);
}

}  // namespace torchplug
