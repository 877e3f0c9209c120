#pragma once
// One backend's devices as the torch layer reaches them: a client of the
// backend's driver (driver_library.h) and the state the core keeps itself
// beside it: the current device of each thread, a per-device stream pool with
// the c10 stream ids torch sees (0 is the default stream, 1..kStreamPoolSize
// the pool), whether the devices were used (and so are unusable in a forked
// child), and where device and pinned memory came from. No torch header here.
#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "driver/driver_library.h"
#include "driver/stream.h"
#include "torchplug/driver.h"

namespace torchplug::driver {

constexpr int kMaxDevices = 16;
constexpr int kMaxRuntimes = 16;
constexpr int kStreamPoolSize = 32;

struct MemoryStats {
  int64_t used_bytes = 0;
  int64_t peak_used_bytes = 0;
  int64_t allocation_count = 0;
  int64_t free_count = 0;
  int64_t failed_allocations = 0;
};

// The torchplug package's folder, where what ships with the core and serves
// every torch release (drivers, device kernels) is found: the parent of the
// folder of the core's module, which is built per torch release
// (torchplug/torch-<major>.<minor>/, see torchplug/torch_builds.py).
std::string core_folder();

// The library the core loads when a backend names no driver: the simulator,
// installed beside the core's module (torchplug/drivers/libtorchplug_simulator.so).
std::string default_driver_path();

class DeviceRuntime {
 public:
  // The runtime of backend `name`, opened on first call with the driver at
  // `path` (default_driver_path() when empty) and client `options`. Refuses
  // (DriverError) another driver for a name already open.
  static DeviceRuntime& open(const std::string& name, const std::string& path, const std::string& options = "");
  // Null when `name` was not opened.
  static DeviceRuntime* find(const std::string& name);
  // The names opened so far.
  static std::vector<std::string> opened_names();
  // Blocks until every stream of every runtime ran what is queued.
  static void wait_for_all_streams();

  const std::string& name() const { return name_; }
  const DriverLibrary& library() const { return library_; }
  TPD_Client* client() const { return client_; }

  int device_count() const { return device_count_.load(std::memory_order_relaxed); }
  TPD_DeviceProperties properties(int device) const;
  // Device 0's TPD_CAPABILITY_* bits.
  uint64_t capabilities() const;
  bool has_capability(uint64_t bit) const { return (capabilities() & bit) != 0; }
  size_t capacity(int device) const { return properties(device).total_memory; }
  // Simulator only: device count and per-device capacity, before first use.
  void configure(int device_count, size_t capacity_bytes);

  bool initialized() const { return initialized_.load(std::memory_order_relaxed); }
  bool in_bad_fork() const { return in_bad_fork_.load(std::memory_order_relaxed); }
  void check_usable() const;
  void check_device(int device) const;

  int current_device() const;
  void set_current_device(int device);

  // Device memory; DriverError(TPD_OUT_OF_MEMORY) when it does not fit.
  // `injected` (optional) says whether simulator fault injection made it fail.
  void* malloc(int device, size_t bytes, bool* injected = nullptr);
  void free(void* pointer);
  // The device whose memory (from malloc) holds `pointer`, or -1.
  int device_of(const void* pointer) const;
  void* host_malloc(size_t bytes);
  void host_free(void* pointer);
  bool is_host_pinned(const void* pointer) const;
  void memory_info(int device, uint64_t& free_bytes, uint64_t& total_bytes) const;

  Stream& default_stream(int device) { return stream(device, 0); }
  Stream& pool_stream(int device, int priority);
  Stream& stream(int device, int64_t id);
  std::vector<Stream*> streams(int device);
  void synchronize(int device);
  bool idle(int device);
  void wait_idle(int device);

  // Simulator controls; DriverError(TPD_UNSUPPORTED) from another driver.
  bool is_simulator() const { return library_.simulator() != nullptr; }
  void inject_allocation_failures(int device, int count);
  void inject_kernel_failures(int device, int count);
  // True (once per injected kernel failure) when the kernel starting now must
  // fail; an atomic load unless a failure was injected.
  bool take_kernel_failure(int device) {
    return armed_kernel_faults_[device].load(std::memory_order_relaxed) > 0 && take_armed_kernel_failure(device);
  }
  void adopt(int device, size_t bytes);
  void release_adopted(int device, size_t bytes);
  MemoryStats stats(int device, bool reset_peak = false) const;
  void sleep(const Stream& stream, double milliseconds);

 private:
  DeviceRuntime(std::string name, const DriverLibrary& library, TPD_Client* client, int id);
  const TPD_SimulatorExtension& simulator(const char* what) const;
  // Per device: the failures injected and not yet seen, so a failure can be told injected.
  using ArmedFaults = std::array<std::atomic<int>, kMaxDevices>;
  void inject_failures(int device, int count, TPD_SimulatorFault fault, ArmedFaults& armed, const char* what);
  bool take_armed_kernel_failure(int device);
  void mark_initialized();
  void refresh_device_count();
  Stream* create_stream(int device, int64_t id, int priority);
  static void mark_bad_forks();

  struct DeviceStreams {
    std::mutex mutex;
    std::array<std::atomic<Stream*>, kStreamPoolSize + 1> slots{};  // [0] the default stream
    int created = 0;
    unsigned next_pool = 0;
  };

  const std::string name_;
  const DriverLibrary& library_;
  TPD_Client* const client_;
  const int id_;  // slot in the per-thread current-device table
  std::atomic<int> device_count_{0};
  std::atomic<bool> initialized_{false};
  std::atomic<bool> in_bad_fork_{false};
  int priority_greatest_ = 0;
  std::array<DeviceStreams, kMaxDevices> streams_;
  ArmedFaults armed_kernel_faults_{};
  ArmedFaults armed_allocation_faults_{};
  mutable std::mutex memory_mutex_;
  std::map<const char*, std::pair<size_t, int>> segments_;  // base -> (bytes, device)
  std::map<const char*, size_t> host_blocks_;
};

}  // namespace torchplug::driver
