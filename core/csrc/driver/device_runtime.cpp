#include "driver/device_runtime.h"

#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <filesystem>
#include <utility>

#include "driver/call_args.h"

namespace torchplug::driver {
namespace {

thread_local std::array<int, kMaxRuntimes> current_devices{};

std::mutex registry_mutex;
// Leaked on purpose: stream workers and allocations may outlive static destruction.
auto* registry = new std::map<std::string, DeviceRuntime*>();

TPD_Client* create_client(const DriverLibrary& library, const std::string& name, const std::string& options) {
  TPD_Client_Create_Args args{};
  args.struct_size = TPD_Client_Create_Args_STRUCT_SIZE;
  args.name = name.c_str();
  args.options = options.empty() ? nullptr : options.c_str();
  TPD_Error* error = library.api().client_create(&args);
  if (error != nullptr) {
    try {
      library.raise(error);
    } catch (const DriverError& failure) {
      throw DriverError(failure.code(), std::string("The driver ") + library.name() + " (" + library.path() +
                                            ") failed to initialise for '" + name + "': " + failure.what());
    }
  }
  return args.client;
}

}  // namespace

std::string core_folder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&core_folder), &info) == 0 || info.dli_fname == nullptr) {
    return ".";
  }
  // The module's folder's parent.
  return std::filesystem::absolute(info.dli_fname).parent_path().parent_path().string();
}

std::string default_driver_path() { return core_folder() + "/drivers/libtorchplug_simulator.so"; }

DeviceRuntime::DeviceRuntime(std::string name, const DriverLibrary& library, TPD_Client* client, int id)
    : name_(std::move(name)), library_(library), client_(client), id_(id) {
  refresh_device_count();
  if (device_count() > 0) {
    priority_greatest_ = properties(0).stream_priority_greatest;
  }
}

void DeviceRuntime::mark_bad_forks() {
  for (auto& [name, runtime] : *registry) {
    if (runtime->initialized_.load()) {
      runtime->in_bad_fork_.store(true);
    }
  }
}

DeviceRuntime& DeviceRuntime::open(const std::string& name, const std::string& path, const std::string& options) {
  static const bool fork_handler_installed = [] {
    return pthread_atfork(nullptr, nullptr, [] { DeviceRuntime::mark_bad_forks(); }) == 0;
  }();
  (void)fork_handler_installed;
  const std::string library_path = path.empty() ? default_driver_path() : path;
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry->find(name);
  if (it != registry->end()) {
    if (it->second->library_.path() != library_path) {
      throw DriverError(TPD_INVALID_ARGUMENT, "The '" + name + "' devices already run on the driver " +
                                                  it->second->library_.path() + "; they cannot switch to " +
                                                  library_path + " in this process.");
    }
    return *it->second;
  }
  if (registry->size() >= static_cast<size_t>(kMaxRuntimes)) {
    throw DriverError(TPD_UNAVAILABLE, "Too many device backends (at most " + std::to_string(kMaxRuntimes) + ").");
  }
  const DriverLibrary& library = DriverLibrary::load(library_path);
  TPD_Client* client = create_client(library, name, options);
  auto* runtime = new DeviceRuntime(name, library, client, static_cast<int>(registry->size()));
  registry->emplace(name, runtime);
  return *runtime;
}

DeviceRuntime* DeviceRuntime::find(const std::string& name) {
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry->find(name);
  return it == registry->end() ? nullptr : it->second;
}

std::vector<std::string> DeviceRuntime::opened_names() {
  std::lock_guard<std::mutex> lock(registry_mutex);
  std::vector<std::string> names;
  for (auto& [name, runtime] : *registry) {
    names.push_back(name);
  }
  return names;
}

void DeviceRuntime::wait_for_all_streams() {
  std::vector<DeviceRuntime*> runtimes;
  {
    std::lock_guard<std::mutex> lock(registry_mutex);
    for (auto& [name, runtime] : *registry) {
      runtimes.push_back(runtime);
    }
  }
  for (DeviceRuntime* runtime : runtimes) {
    if (runtime->initialized() && !runtime->in_bad_fork()) {
      for (int device = 0; device < runtime->device_count(); ++device) {
        runtime->wait_idle(device);
      }
    }
  }
}

void DeviceRuntime::refresh_device_count() {
  auto args = client_args<TPD_Client_DeviceCount_Args>(TPD_Client_DeviceCount_Args_STRUCT_SIZE, client_);
  library_.check(library_.api().client_device_count(&args));
  device_count_.store(std::min(args.device_count, kMaxDevices));
}

TPD_DeviceProperties DeviceRuntime::properties(int device) const {
  check_device(device);
  TPD_DeviceProperties properties{};
  properties.struct_size = TPD_DeviceProperties_STRUCT_SIZE;
  auto args = client_args<TPD_Device_GetProperties_Args>(TPD_Device_GetProperties_Args_STRUCT_SIZE, client_);
  args.device = device;
  args.properties = &properties;
  library_.check(library_.api().device_get_properties(&args));
  return properties;
}

uint64_t DeviceRuntime::capabilities() const { return device_count() > 0 ? properties(0).capabilities : 0; }

const TPD_SimulatorExtension& DeviceRuntime::simulator(const char* what) const {
  if (library_.simulator() == nullptr) {
    throw DriverError(TPD_UNSUPPORTED, std::string(what) + " is a control of torchplug's simulator, but the '" +
                                           name_ + "' devices run on the driver " + library_.name() + " (" +
                                           library_.path() + ").");
  }
  return *library_.simulator();
}

void DeviceRuntime::configure(int device_count, size_t capacity_bytes) {
  const TPD_SimulatorExtension& extension = simulator("Configuring the device count and memory");
  if (initialized() && (device_count != this->device_count() || capacity_bytes != capacity(0))) {
    throw DriverError(TPD_INVALID_ARGUMENT, "The '" + name_ +
                                                "' devices are already in use; configure the device count and "
                                                "memory before the first tensor or stream is created (e.g. with "
                                                "the environment variables read at start-up).");
  }
  auto args = client_args<TPD_Simulator_Configure_Args>(TPD_Simulator_Configure_Args_STRUCT_SIZE, client_);
  args.device_count = device_count;
  args.capacity_bytes = capacity_bytes;
  library_.check(extension.configure(&args));
  refresh_device_count();
}

void DeviceRuntime::check_usable() const {
  if (in_bad_fork_.load(std::memory_order_relaxed)) {
    throw DriverError(TPD_UNAVAILABLE, "Cannot re-initialize " + name_ + " in forked subprocess. To use " + name_ +
                                           " with multiprocessing, use the 'spawn' start method "
                                           "(multiprocessing.set_start_method('spawn')).");
  }
}

void DeviceRuntime::check_device(int device) const {
  const int count = device_count();
  if (device < 0 || device >= count) {
    throw DriverError(TPD_INVALID_DEVICE,
                      "Invalid device index " + std::to_string(device) + " for '" + name_ + "': there " +
                          (count == 1 ? "is 1 device" : "are " + std::to_string(count) + " devices") +
                          " (valid indices 0.." + std::to_string(count - 1) + ").");
  }
}

void DeviceRuntime::mark_initialized() {
  check_usable();
  if (!initialized_.load(std::memory_order_relaxed)) {
    initialized_.store(true);
  }
}

int DeviceRuntime::current_device() const { return current_devices[id_]; }

void DeviceRuntime::set_current_device(int device) {
  check_device(device);
  current_devices[id_] = device;
}

void* DeviceRuntime::malloc(int device, size_t bytes, bool* injected) {
  check_device(device);
  mark_initialized();
  auto args = client_args<TPD_Memory_Allocate_Args>(TPD_Memory_Allocate_Args_STRUCT_SIZE, client_);
  args.device = device;
  args.size = bytes;
  TPD_Error* error = library_.api().memory_allocate(&args);
  if (error != nullptr) {
    // Fault injection goes through this runtime, which so knows which failures it asked for.
    std::atomic<int>& armed = armed_allocation_faults_[device];
    int count = armed.load();
    bool was_injected = false;
    while (count > 0 && !(was_injected = armed.compare_exchange_weak(count, count - 1))) {
    }
    if (injected != nullptr) {
      *injected = was_injected;
    }
    library_.raise(error);
  }
  std::lock_guard<std::mutex> lock(memory_mutex_);
  segments_.emplace(static_cast<const char*>(args.pointer), std::make_pair(bytes, device));
  return args.pointer;
}

void DeviceRuntime::free(void* pointer) {
  if (pointer == nullptr) {
    return;
  }
  {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    segments_.erase(static_cast<const char*>(pointer));
  }
  auto args = client_args<TPD_Memory_Free_Args>(TPD_Memory_Free_Args_STRUCT_SIZE, client_);
  args.pointer = pointer;
  library_.check(library_.api().memory_free(&args));
}

namespace {

// The entry of `blocks` (base -> size) holding `pointer`, or end().
template <typename Map>
auto holding(const Map& blocks, const void* pointer, size_t (*size_of)(const typename Map::mapped_type&)) {
  auto it = blocks.upper_bound(static_cast<const char*>(pointer));
  if (it == blocks.begin()) {
    return blocks.end();
  }
  --it;
  return static_cast<const char*>(pointer) < it->first + std::max<size_t>(size_of(it->second), 1) ? it : blocks.end();
}

}  // namespace

int DeviceRuntime::device_of(const void* pointer) const {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  auto it = holding(segments_, pointer, +[](const std::pair<size_t, int>& entry) { return entry.first; });
  return it == segments_.end() ? -1 : it->second.second;
}

void* DeviceRuntime::host_malloc(size_t bytes) {
  auto args = client_args<TPD_HostMemory_Allocate_Args>(TPD_HostMemory_Allocate_Args_STRUCT_SIZE, client_);
  args.size = bytes;
  library_.check(library_.api().host_memory_allocate(&args));
  std::lock_guard<std::mutex> lock(memory_mutex_);
  host_blocks_.emplace(static_cast<const char*>(args.pointer), bytes);
  return args.pointer;
}

void DeviceRuntime::host_free(void* pointer) {
  {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    host_blocks_.erase(static_cast<const char*>(pointer));
  }
  auto args = client_args<TPD_HostMemory_Free_Args>(TPD_HostMemory_Free_Args_STRUCT_SIZE, client_);
  args.pointer = pointer;
  library_.check(library_.api().host_memory_free(&args));
}

bool DeviceRuntime::is_host_pinned(const void* pointer) const {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  return holding(host_blocks_, pointer, +[](const size_t& size) { return size; }) != host_blocks_.end();
}

void DeviceRuntime::memory_info(int device, uint64_t& free_bytes, uint64_t& total_bytes) const {
  check_device(device);
  auto args = client_args<TPD_Memory_GetInfo_Args>(TPD_Memory_GetInfo_Args_STRUCT_SIZE, client_);
  args.device = device;
  library_.check(library_.api().memory_get_info(&args));
  free_bytes = args.free_bytes;
  total_bytes = args.total_bytes;
}

Stream* DeviceRuntime::create_stream(int device, int64_t id, int priority) {
  auto args = client_args<TPD_Stream_Create_Args>(TPD_Stream_Create_Args_STRUCT_SIZE, client_);
  args.device = device;
  // torch asks for any priority; the driver serves its range, as CUDA clamps.
  args.priority = std::min(0, std::max(priority, priority_greatest_));
  library_.check(library_.api().stream_create(&args));
  // Never destroyed: c10 streams are ids that stay valid for the process.
  return new Stream(library_, client_, args.stream, device, id, args.priority);
}

Stream& DeviceRuntime::stream(int device, int64_t id) {
  if (id >= 0 && id <= kStreamPoolSize && device >= 0 && device < kMaxDevices) {
    Stream* found = streams_[device].slots[id].load(std::memory_order_acquire);
    if (found != nullptr) {
      return *found;
    }
  }
  check_device(device);
  mark_initialized();
  DeviceStreams& streams = streams_[device];
  std::lock_guard<std::mutex> lock(streams.mutex);
  if (streams.slots[0].load() == nullptr) {
    streams.slots[0].store(create_stream(device, 0, 0), std::memory_order_release);
    streams.created = 1;
  }
  if (id < 0 || id >= streams.created) {
    throw DriverError(TPD_INVALID_HANDLE, "Unknown stream id " + std::to_string(id) + " on " + name_ + ":" +
                                              std::to_string(device) + ".");
  }
  return *streams.slots[id].load();
}

Stream& DeviceRuntime::pool_stream(int device, int priority) {
  default_stream(device);  // checks the device, creates the default stream first
  DeviceStreams& streams = streams_[device];
  std::lock_guard<std::mutex> lock(streams.mutex);
  if (streams.created <= kStreamPoolSize) {
    const int id = streams.created;
    streams.slots[id].store(create_stream(device, id, priority), std::memory_order_release);
    streams.created = id + 1;
    return *streams.slots[id].load();
  }
  const unsigned slot = 1 + (streams.next_pool++ % kStreamPoolSize);
  return *streams.slots[slot].load();
}

std::vector<Stream*> DeviceRuntime::streams(int device) {
  check_device(device);
  std::vector<Stream*> result;
  DeviceStreams& streams = streams_[device];
  std::lock_guard<std::mutex> lock(streams.mutex);
  for (int id = 0; id < streams.created; ++id) {
    result.push_back(streams.slots[id].load());
  }
  return result;
}

void DeviceRuntime::synchronize(int device) {
  for (Stream* stream : streams(device)) {
    stream->synchronize();
  }
}

bool DeviceRuntime::idle(int device) {
  for (Stream* stream : streams(device)) {
    if (!stream->query()) {
      return false;
    }
  }
  return true;
}

void DeviceRuntime::wait_idle(int device) {
  for (Stream* stream : streams(device)) {
    stream->wait_idle();
  }
}

void DeviceRuntime::inject_allocation_failures(int device, int count) {
  inject_failures(device, count, TPD_SIMULATOR_FAIL_ALLOCATIONS, armed_allocation_faults_,
                  "Injecting allocation failures");
}

void DeviceRuntime::inject_kernel_failures(int device, int count) {
  inject_failures(device, count, TPD_SIMULATOR_FAIL_KERNEL_LAUNCHES, armed_kernel_faults_,
                  "Injecting kernel failures");
}

void DeviceRuntime::inject_failures(int device, int count, TPD_SimulatorFault fault, ArmedFaults& armed,
                                    const char* what) {
  const TPD_SimulatorExtension& extension = simulator(what);
  check_device(device);
  auto args = client_args<TPD_Simulator_InjectFault_Args>(TPD_Simulator_InjectFault_Args_STRUCT_SIZE, client_);
  args.device = device;
  args.fault = fault;
  args.count = count;
  library_.check(extension.inject_fault(&args));
  armed[device].store(count);
}

bool DeviceRuntime::take_armed_kernel_failure(int device) {
  auto args =
      client_args<TPD_Simulator_TakeKernelFault_Args>(TPD_Simulator_TakeKernelFault_Args_STRUCT_SIZE, client_);
  args.device = device;
  library_.check(simulator("Taking a kernel failure").take_kernel_fault(&args));
  std::atomic<int>& armed = armed_kernel_faults_[device];
  if (args.taken == 0) {
    armed.store(0);
    return false;
  }
  int count = armed.load();
  while (count > 0 && !armed.compare_exchange_weak(count, count - 1)) {
  }
  return true;
}

void DeviceRuntime::adopt(int device, size_t bytes) {
  check_device(device);
  mark_initialized();
  auto args = client_args<TPD_Simulator_Adopt_Args>(TPD_Simulator_Adopt_Args_STRUCT_SIZE, client_);
  args.device = device;
  args.bytes = bytes;
  args.release = 0;
  library_.check(simulator("Adopting host memory").adopt(&args));
}

void DeviceRuntime::release_adopted(int device, size_t bytes) {
  auto args = client_args<TPD_Simulator_Adopt_Args>(TPD_Simulator_Adopt_Args_STRUCT_SIZE, client_);
  args.device = device;
  args.bytes = bytes;
  args.release = 1;
  library_.check(simulator("Releasing adopted host memory").adopt(&args));
}

MemoryStats DeviceRuntime::stats(int device, bool reset_peak) const {
  check_device(device);
  MemoryStats result;
  if (library_.simulator() == nullptr) {
    return result;  // another driver keeps no such statistics; the allocator's own remain
  }
  auto args = client_args<TPD_Simulator_Stats_Args>(TPD_Simulator_Stats_Args_STRUCT_SIZE, client_);
  args.device = device;
  args.reset_peak = reset_peak ? 1 : 0;
  library_.check(library_.simulator()->stats(&args));
  result.used_bytes = args.used_bytes;
  result.peak_used_bytes = args.peak_used_bytes;
  result.allocation_count = args.allocation_count;
  result.free_count = args.free_count;
  result.failed_allocations = args.failed_allocations;
  return result;
}

void DeviceRuntime::sleep(const Stream& stream, double milliseconds) {
  auto args =
      stream_args<TPD_Simulator_Sleep_Args>(TPD_Simulator_Sleep_Args_STRUCT_SIZE, client_, stream.handle());
  args.milliseconds = milliseconds;
  const TPD_SimulatorExtension& extension = simulator("Sleeping on a stream");
  stream.note_issued();
  library_.check(extension.sleep(&args));
}

}  // namespace torchplug::driver
