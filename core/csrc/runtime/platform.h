#pragma once
// A platform is one family of simulated accelerators (one per backend: "foo",
// "npu", "hpu" each get their own devices, memory and streams). Device memory
// is host memory with a per-device capacity; it is handed out like a driver's
// malloc, so the caching lives one layer up, in the torch allocator.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/event.h"
#include "runtime/stream.h"

namespace torchplug::runtime {

struct DeviceMemoryStats {
  int64_t used_bytes = 0;         // held from the device right now
  int64_t peak_used_bytes = 0;    // high-water mark since the last reset
  int64_t allocation_count = 0;   // device mallocs since start
  int64_t free_count = 0;         // device frees since start
  int64_t failed_allocations = 0; // capacity exceeded or injected failure
};

enum class CopyKind { HostToDevice, DeviceToHost, DeviceToDevice, HostToHost };

class Platform {
 public:
  static constexpr int kMaxDevices = 16;
  static constexpr int kMaxPlatforms = 16;
  static constexpr int kStreamPoolSize = 32;
  // Every device allocation's address is a multiple of it.
  static constexpr size_t kMemoryAlignment = 64;

  // The platform called `name`, created with the defaults on first use.
  static Platform& get(const std::string& name);

  const std::string& name() const { return name_; }

  // Sets device count and per-device capacity; only before the first
  // allocation or stream, since both are fixed for the life of a device.
  void configure(int device_count, size_t capacity_bytes);
  int device_count() const { return device_count_; }
  size_t capacity(int device) const;
  bool initialized() const { return initialized_.load(); }
  // True in a child forked after this platform was initialised: its stream
  // workers did not survive the fork, so the devices are unusable there.
  bool in_bad_fork() const { return in_bad_fork_.load(); }
  // Throws the fork error in such a child.
  void check_usable() const;
  void check_device(int device) const;

  int current_device() const;
  void set_current_device(int device);

  // Device memory, like a driver's malloc: throws OutOfMemoryError.
  void* malloc(int device, size_t bytes);
  // Device memory other processes can map: the shared pages of a memory file
  // (memfd) this platform holds open until free. Counted as malloc's.
  void* malloc_shareable(int device, size_t bytes);
  // The memory file behind `base` from malloc_shareable, or -1.
  int shared_file(const void* base) const;
  // Maps `bytes` of the memory file `fd` (another allocation's, from
  // malloc_shareable in any process) as device memory of `device`, until free.
  // Not counted against the device: the allocation's owner counts it.
  // The caller still owns `fd` and may close it: the mapping holds the pages.
  void* map_shared(int device, int fd, size_t bytes);
  // Frees memory of malloc and malloc_shareable, and unmaps map_shared's.
  void free(void* pointer);
  // Counts memory the platform did not map itself (a kernel's output taken
  // over as device memory) against a device's capacity.
  void adopt(int device, size_t bytes);
  void release_adopted(int device, size_t bytes);
  // The device owning `pointer`, or -1.
  int device_of(const void* pointer) const;
  DeviceMemoryStats stats(int device) const;
  void reset_peak(int device);
  // Makes the next `count` device allocations on `device` fail as if memory were full.
  void inject_allocation_failures(int device, int count);
  // Makes the next `count` kernels launched on `device` fail while they run,
  // as a faulting kernel on real hardware would.
  void inject_kernel_failures(int device, int count);
  // True (once per injected failure) when the kernel starting now must fail.
  bool take_kernel_failure(int device);
  // The same for kernels their caller runs and fails itself (a driver
  // client's), counted apart from the host functions take_kernel_failure fails.
  void inject_launch_failures(int device, int count);
  bool take_launch_failure(int device);

  // Pinned host memory.
  void* host_malloc(size_t bytes);
  void host_free(void* pointer);
  bool is_host_pinned(const void* pointer) const;

  Stream& default_stream(int device);
  // A stream from the device's pool (round robin, as real drivers do).
  Stream& pool_stream(int device, int priority = 0);
  Stream& stream(int device, int64_t id);
  // A stream its caller owns (a driver client's), apart from the default
  // stream and the pool; the device counts as in use from then on, as with
  // the platform's own streams.
  std::unique_ptr<Stream> create_stream(int device, int priority);

  void memcpy(void* dst, const void* src, size_t bytes);
  void memcpy_async(void* dst, const void* src, size_t bytes, Stream& stream);

 private:
  Platform(std::string name, int id);
  struct Device;
  Device& device(int index);
  const Device& device(int index) const;
  // The device of `device_index` with its streams locked by `lock`, its
  // default stream created on first use.
  Device& device_with_streams(int device_index, std::unique_lock<std::mutex>& lock);
  void mark_initialized();
  static void mark_bad_forks();
  // Where a segment's memory comes from, for free.
  enum class Backing { kHeap, kSharedFile, kMapped };
  struct Segment {
    size_t bytes;
    int device;
    Backing backing;
    int fd;  // kSharedFile: the memory file, closed by free; else -1
  };
  // Counts `bytes` against `device` (OutOfMemoryError when they do not fit), then backs them.
  void* allocate(int device, size_t bytes, Backing backing, int fd);
  // Maps `bytes` of memory file `fd`, protected in strict mode: null when mmap fails.
  static void* map_file(int fd, size_t bytes);

  const std::string name_;
  const int id_;  // slot in the per-thread current-device table
  int device_count_ = 2;
  size_t capacity_ = size_t{8} << 30;
  std::atomic<bool> initialized_{false};
  std::atomic<bool> in_bad_fork_{false};
  std::vector<std::unique_ptr<Device>> devices_;
  // Ids of created streams start past the pool's, so no two streams of a device share one.
  std::atomic<int64_t> next_created_stream_id_{kStreamPoolSize + 1};
  mutable std::mutex segments_mutex_;
  std::map<const char*, Segment> segments_;  // by base
  mutable std::mutex host_mutex_;
  std::map<const char*, size_t> host_blocks_;
};

}  // namespace torchplug::runtime
