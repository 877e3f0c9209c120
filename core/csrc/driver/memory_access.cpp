#include "driver/memory_access.h"

#include <atomic>
#include <mutex>

#include "driver/call_args.h"
#include "driver/device_runtime.h"

namespace torchplug::driver {
namespace {

std::atomic<bool> strict{false};
std::atomic<DeviceRuntime*> window_runtime{nullptr};
std::mutex runtimes_mutex;
auto* simulator_runtimes = new std::vector<DeviceRuntime*>();  // leaked, as the runtimes

void apply(DeviceRuntime& runtime, bool enabled) {
  auto args =
      client_args<TPD_Simulator_StrictMemory_Args>(TPD_Simulator_StrictMemory_Args_STRUCT_SIZE, runtime.client());
  args.enable = enabled ? 1 : 0;
  runtime.library().check(runtime.library().simulator()->strict_memory(&args));
}

}  // namespace

bool strict_memory() { return strict.load(std::memory_order_relaxed); }

void set_strict_memory(bool enabled) {
  std::lock_guard<std::mutex> lock(runtimes_mutex);
  for (DeviceRuntime* runtime : *simulator_runtimes) {
    apply(*runtime, enabled);
  }
  strict.store(enabled);
}

void strict_memory_runtime_opened(DeviceRuntime& runtime) {
  if (!runtime.is_simulator()) {
    return;
  }
  std::lock_guard<std::mutex> lock(runtimes_mutex);
  for (DeviceRuntime* known : *simulator_runtimes) {
    if (known == &runtime) {
      return;
    }
  }
  if (strict.load()) {
    apply(runtime, true);
  }
  simulator_runtimes->push_back(&runtime);
  DeviceRuntime* none = nullptr;
  window_runtime.compare_exchange_strong(none, &runtime);
}

MemoryAccess::MemoryAccess(std::initializer_list<const void*> pointers) {
  if (strict_memory()) {
    open(pointers.begin(), pointers.size());
  }
}

MemoryAccess::MemoryAccess(const std::vector<const void*>& pointers) {
  if (strict_memory() && !pointers.empty()) {
    open(pointers.data(), pointers.size());
  }
}

void MemoryAccess::open(const void* const* pointers, size_t count) {
  DeviceRuntime* runtime = window_runtime.load();
  if (runtime == nullptr) {
    return;
  }
  auto args = client_args<TPD_Simulator_Access_Args>(TPD_Simulator_Access_Args_STRUCT_SIZE, runtime->client());
  args.pointers = pointers;
  args.pointer_count = count;
  runtime->library().check(runtime->library().simulator()->open_access(&args));
  window_ = args.window;
}

MemoryAccess::~MemoryAccess() {
  if (window_ == nullptr) {
    return;
  }
  DeviceRuntime* runtime = window_runtime.load();
  auto args = client_args<TPD_Simulator_Access_Args>(TPD_Simulator_Access_Args_STRUCT_SIZE, runtime->client());
  args.window = window_;
  TPD_Error* error = runtime->library().simulator()->close_access(&args);
  if (error != nullptr) {
    try {
      runtime->library().raise(error);
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor; the window stays open
    }
  }
}

}  // namespace torchplug::driver
