#pragma once
#include <memory>
#include <optional>

#include <ATen/core/Generator.h>
#include <c10/core/Device.h>
#include <c10/core/Stream.h>

namespace torchplug {

// The default generator of each device; created on first use.
const at::Generator& default_generator(c10::Device device);
at::Generator new_generator(c10::Device device);
// The CPU engine behind a device generator, for the host kernels that draw
// from it now: once the draws queued from it have run.
at::Generator engine_of(const at::Generator& device_generator);

// A random operator queued on a stream draws from the engine when it runs.
// The draws keep the program's order (and the CPU's values) as long as every
// queued draw of a generator is on one stream and whatever reads, reseeds or
// draws from the engine on the host first waits for them.
struct QueuedDraw {
  at::Generator engine;
  std::shared_ptr<void> pending;  // the draw is done when the last copy is dropped
};
// Reserves a draw from `device_generator` (a torchplug device generator) by a
// kernel queued on `stream`; nothing when a queued draw of it is pending on
// another stream (the operator then runs now, after it).
std::optional<QueuedDraw> queue_draw(const at::Generator& device_generator, c10::Stream stream);
// Whether `generator` is a torchplug generator of `device`.
bool is_device_generator(const at::Generator& generator, c10::Device device);

}  // namespace torchplug
