#pragma once
// Dispatcher registrations last as long as their torch::Library objects, and
// each device type is registered once however often a backend activates.
#include <array>
#include <memory>
#include <mutex>
#include <vector>

#include <c10/core/DeviceType.h>
#include <torch/library.h>

namespace torchplug {

using Libraries = std::vector<std::unique_ptr<torch::Library>>;

// Runs `build` the first time this call site is reached for `type` and keeps
// the libraries it returns for the life of the process. Each call site (each
// `Build` type) keeps its own record.
template <typename Build>
void register_once(c10::DeviceType type, Build build) {
  static std::mutex mutex;
  static std::array<bool, static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)> done{};
  static auto* kept = new Libraries();  // never destroyed: torch may dispatch during exit
  std::lock_guard<std::mutex> lock(mutex);
  if (done[static_cast<size_t>(type)]) {
    return;
  }
  for (auto& library : build()) {
    kept->push_back(std::move(library));
  }
  done[static_cast<size_t>(type)] = true;
}

}  // namespace torchplug
