#include "runtime/platform.h"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <array>
#include <system_error>
#include <thread>
#include <vector>

#include "runtime/errors.h"
#include "runtime/memory_guard.h"

namespace torchplug::runtime {
namespace {

thread_local std::array<int, Platform::kMaxPlatforms> current_devices{};

std::string format_bytes(size_t bytes) {
  std::ostringstream out;
  out.precision(2);
  out << std::fixed;
  if (bytes >= (size_t{1} << 30)) {
    out << static_cast<double>(bytes) / (1 << 30) << " GiB";
  } else if (bytes >= (size_t{1} << 20)) {
    out << static_cast<double>(bytes) / (1 << 20) << " MiB";
  } else {
    out << bytes << " bytes";
  }
  return out.str();
}

}  // namespace

struct Platform::Device {
  mutable std::mutex mutex;
  DeviceMemoryStats stats;
  int failures_to_inject = 0;
  std::atomic<int> kernel_failures_to_inject{0};
  std::atomic<int> launch_failures_to_inject{0};
  std::mutex streams_mutex;
  std::vector<std::unique_ptr<Stream>> streams;  // [0] is the default stream
  unsigned next_pool_stream = 0;
};

namespace {
std::mutex registry_mutex;
// Leaked on purpose: stream workers and allocations may outlive static destruction.
auto* registry = new std::map<std::string, Platform*>();
}  // namespace

void Platform::mark_bad_forks() {
  for (auto& [name, platform] : *registry) {
    if (platform->initialized_.load()) {
      platform->in_bad_fork_.store(true);
    }
  }
}

void Platform::check_usable() const {
  if (in_bad_fork_.load(std::memory_order_relaxed)) {
    throw RuntimeError("Cannot re-initialize " + name_ +
                       " in forked subprocess. To use " + name_ +
                       " with multiprocessing, use the 'spawn' start method "
                       "(multiprocessing.set_start_method('spawn')).");
  }
}

Platform& Platform::get(const std::string& name) {
  static const bool fork_handler_installed = [] {
    return pthread_atfork(nullptr, nullptr, [] { Platform::mark_bad_forks(); }) == 0;
  }();
  (void)fork_handler_installed;
  std::lock_guard<std::mutex> lock(registry_mutex);
  auto it = registry->find(name);
  if (it == registry->end()) {
    const auto id = static_cast<int>(registry->size());
    if (id >= kMaxPlatforms) {
      throw RuntimeError("Too many simulated platforms (at most " + std::to_string(kMaxPlatforms) + ").");
    }
    it = registry->emplace(name, new Platform(name, id)).first;
  }
  return *it->second;
}

Platform::Platform(std::string name, int id) : name_(std::move(name)), id_(id) {
  for (int i = 0; i < kMaxDevices; ++i) {
    devices_.push_back(std::make_unique<Device>());
  }
}

void Platform::configure(int device_count, size_t capacity_bytes) {
  if (initialized_.load()) {
    if (device_count == device_count_ && capacity_bytes == capacity_) {
      return;
    }
    throw RuntimeError("The '" + name_ +
                       "' devices are already in use; configure the device count and memory "
                       "before the first tensor or stream is created (e.g. with the environment "
                       "variables read at start-up).");
  }
  if (device_count < 1 || device_count > kMaxDevices) {
    throw RuntimeError("Device count must be between 1 and " + std::to_string(kMaxDevices) +
                       ", got " + std::to_string(device_count) + ".");
  }
  if (capacity_bytes == 0) {
    throw RuntimeError("Device memory capacity must be positive.");
  }
  device_count_ = device_count;
  capacity_ = capacity_bytes;
}

void Platform::mark_initialized() {
  check_usable();
  if (!initialized_.load(std::memory_order_relaxed)) {
    initialized_.store(true);
  }
}

size_t Platform::capacity(int device_index) const {
  check_device(device_index);
  return capacity_;
}

void Platform::check_device(int device_index) const {
  if (device_index < 0 || device_index >= device_count_) {
    throw RuntimeError("Invalid device index " + std::to_string(device_index) + " for '" + name_ +
                       "': there " + (device_count_ == 1 ? "is 1 device" : "are " + std::to_string(device_count_) + " devices") +
                       " (valid indices 0.." + std::to_string(device_count_ - 1) + ").");
  }
}

Platform::Device& Platform::device(int index) {
  check_device(index);
  return *devices_[index];
}

const Platform::Device& Platform::device(int index) const {
  check_device(index);
  return *devices_[index];
}

int Platform::current_device() const { return current_devices[id_]; }

void Platform::set_current_device(int device_index) {
  check_device(device_index);
  current_devices[id_] = device_index;
}

void* Platform::malloc(int device_index, size_t bytes) {
  return allocate(device_index, bytes, Backing::kHeap, -1);
}

void* Platform::malloc_shareable(int device_index, size_t bytes) {
  check_device(device_index);
  // Sealed at its size: a process that maps it cannot shrink the pages from
  // under the others (their next access would fault).
  const int fd = memfd_create("torchplug-device-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    const int error = errno;
    throw OutOfMemoryError("Cannot create shareable memory for " + name_ + ":" + std::to_string(device_index) +
                               ": " + std::strerror(error) +
                               (error == EMFILE ? " (each shareable allocation holds a file descriptor until it "
                                                  "is freed; raise the limit with `ulimit -n`)."
                                                : "."),
                           device_index, bytes, 0, capacity_);
  }
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int error = errno;
    close(fd);
    throw OutOfMemoryError("The host could not back " + format_bytes(bytes) + " of shareable memory for " + name_ +
                               ":" + std::to_string(device_index) + ": " + std::strerror(error) + ".",
                           device_index, bytes, 0, capacity_);
  }
  try {
    return allocate(device_index, bytes, Backing::kSharedFile, fd);
  } catch (...) {
    close(fd);
    throw;
  }
}

int Platform::shared_file(const void* base) const {
  std::lock_guard<std::mutex> lock(segments_mutex_);
  auto it = segments_.find(static_cast<const char*>(base));
  return it == segments_.end() ? -1 : it->second.fd;
}

void* Platform::map_shared(int device_index, int fd, size_t bytes) {
  check_device(device_index);
  mark_initialized();
  void* pointer = map_file(fd, bytes);
  if (pointer == nullptr) {
    throw OutOfMemoryError("Cannot map " + format_bytes(bytes) + " of shared memory as " + name_ + ":" +
                               std::to_string(device_index) + " memory: " + std::strerror(errno) + ".",
                           device_index, bytes, 0, capacity_);
  }
  std::lock_guard<std::mutex> lock(segments_mutex_);
  segments_.emplace(static_cast<const char*>(pointer), Segment{bytes, device_index, Backing::kMapped, -1});
  return pointer;
}

void* Platform::map_file(int fd, size_t bytes) {
  if (strict_mode()) {
    return map_protected(bytes, fd);
  }
  void* pointer = mmap(nullptr, bytes == 0 ? 1 : bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  return pointer == MAP_FAILED ? nullptr : pointer;
}

void* Platform::allocate(int device_index, size_t bytes, Backing backing, int fd) {
  Device& dev = device(device_index);
  mark_initialized();
  {
    std::lock_guard<std::mutex> lock(dev.mutex);
    const size_t used = static_cast<size_t>(dev.stats.used_bytes);
    const bool injected = dev.failures_to_inject > 0;
    if (injected || used + bytes > capacity_) {
      if (injected) {
        --dev.failures_to_inject;
      }
      ++dev.stats.failed_allocations;
      const size_t free_bytes = capacity_ > used ? capacity_ - used : 0;
      std::string message = "Tried to allocate " + format_bytes(bytes) + " on " + name_ + ":" +
                            std::to_string(device_index) + " but only " + format_bytes(free_bytes) +
                            " of " + format_bytes(capacity_) + " is free";
      message += injected ? " (failure injected for testing)." : ".";
      throw OutOfMemoryError(message, device_index, bytes, free_bytes, capacity_, injected);
    }
    dev.stats.used_bytes += static_cast<int64_t>(bytes);
    dev.stats.peak_used_bytes = std::max(dev.stats.peak_used_bytes, dev.stats.used_bytes);
    ++dev.stats.allocation_count;
  }
  void* pointer = nullptr;
  if (backing == Backing::kSharedFile) {
    pointer = map_file(fd, bytes);
  } else if (strict_mode()) {
    pointer = map_protected(bytes);
  } else if (posix_memalign(&pointer, kMemoryAlignment, bytes == 0 ? kMemoryAlignment : bytes) != 0) {
    pointer = nullptr;
  }
  if (pointer == nullptr) {
    std::lock_guard<std::mutex> lock(dev.mutex);
    dev.stats.used_bytes -= static_cast<int64_t>(bytes);
    --dev.stats.allocation_count;
    throw OutOfMemoryError("The host could not back " + format_bytes(bytes) + " of simulated memory for " +
                               name_ + ":" + std::to_string(device_index) + ".",
                           device_index, bytes, 0, capacity_);
  }
  std::lock_guard<std::mutex> lock(segments_mutex_);
  segments_.emplace(static_cast<const char*>(pointer), Segment{bytes, device_index, backing, fd});
  return pointer;
}

void Platform::free(void* pointer) {
  if (pointer == nullptr) {
    return;
  }
  Segment segment{};
  {
    std::lock_guard<std::mutex> lock(segments_mutex_);
    auto it = segments_.find(static_cast<const char*>(pointer));
    if (it == segments_.end()) {
      throw RuntimeError("Freeing a pointer that is not " + name_ + " device memory.");
    }
    segment = it->second;
    segments_.erase(it);
  }
  if (segment.backing != Backing::kMapped) {
    Device& dev = *devices_[segment.device];
    std::lock_guard<std::mutex> lock(dev.mutex);
    dev.stats.used_bytes -= static_cast<int64_t>(segment.bytes);
    ++dev.stats.free_count;
  }
  // Memory allocated in strict mode was mapped protected, whatever its backing.
  if (!unmap_protected(pointer)) {
    if (segment.backing == Backing::kHeap) {
      std::free(pointer);
    } else {
      munmap(pointer, segment.bytes == 0 ? 1 : segment.bytes);
    }
  }
  if (segment.fd >= 0) {
    close(segment.fd);
  }
}

void Platform::adopt(int device_index, size_t bytes) {
  Device& dev = device(device_index);
  mark_initialized();
  std::lock_guard<std::mutex> lock(dev.mutex);
  const size_t used = static_cast<size_t>(dev.stats.used_bytes);
  if (used + bytes > capacity_) {
    ++dev.stats.failed_allocations;
    const size_t free_bytes = capacity_ > used ? capacity_ - used : 0;
    throw OutOfMemoryError("Tried to allocate " + format_bytes(bytes) + " on " + name_ + ":" +
                               std::to_string(device_index) + " but only " + format_bytes(free_bytes) +
                               " of " + format_bytes(capacity_) + " is free.",
                           device_index, bytes, free_bytes, capacity_);
  }
  dev.stats.used_bytes += static_cast<int64_t>(bytes);
  dev.stats.peak_used_bytes = std::max(dev.stats.peak_used_bytes, dev.stats.used_bytes);
  ++dev.stats.allocation_count;
}

void Platform::release_adopted(int device_index, size_t bytes) {
  Device& dev = *devices_[device_index];
  std::lock_guard<std::mutex> lock(dev.mutex);
  dev.stats.used_bytes -= static_cast<int64_t>(bytes);
  ++dev.stats.free_count;
}

int Platform::device_of(const void* pointer) const {
  std::lock_guard<std::mutex> lock(segments_mutex_);
  auto it = segments_.upper_bound(static_cast<const char*>(pointer));
  if (it == segments_.begin()) {
    return -1;
  }
  --it;
  if (static_cast<const char*>(pointer) < it->first + std::max<size_t>(it->second.bytes, 1)) {
    return it->second.device;
  }
  return -1;
}

DeviceMemoryStats Platform::stats(int device_index) const {
  const Device& dev = device(device_index);
  std::lock_guard<std::mutex> lock(dev.mutex);
  return dev.stats;
}

void Platform::reset_peak(int device_index) {
  Device& dev = device(device_index);
  std::lock_guard<std::mutex> lock(dev.mutex);
  dev.stats.peak_used_bytes = dev.stats.used_bytes;
}

void Platform::inject_allocation_failures(int device_index, int count) {
  Device& dev = device(device_index);
  std::lock_guard<std::mutex> lock(dev.mutex);
  dev.failures_to_inject = count;
}

void Platform::inject_kernel_failures(int device_index, int count) {
  device(device_index).kernel_failures_to_inject.store(count);
}

namespace {

bool take_one(std::atomic<int>& pending) {
  int count = pending.load(std::memory_order_relaxed);
  while (count > 0) {
    if (pending.compare_exchange_weak(count, count - 1)) {
      return true;
    }
  }
  return false;
}

}  // namespace

void Platform::inject_launch_failures(int device_index, int count) {
  device(device_index).launch_failures_to_inject.store(count);
}

bool Platform::take_launch_failure(int device_index) {
  return take_one(device(device_index).launch_failures_to_inject);
}

bool Platform::take_kernel_failure(int device_index) {
  std::atomic<int>& pending = device(device_index).kernel_failures_to_inject;
  int count = pending.load(std::memory_order_relaxed);
  while (count > 0) {
    if (pending.compare_exchange_weak(count, count - 1)) {
      return true;
    }
  }
  return false;
}

void* Platform::host_malloc(size_t bytes) {
  void* pointer = nullptr;
  if (posix_memalign(&pointer, 4096, bytes == 0 ? 1 : bytes) != 0) {
    throw OutOfMemoryError("Could not allocate " + format_bytes(bytes) + " of pinned host memory.", -1,
                           bytes, 0, 0);
  }
  std::lock_guard<std::mutex> lock(host_mutex_);
  host_blocks_.emplace(static_cast<const char*>(pointer), bytes == 0 ? 1 : bytes);
  return pointer;
}

void Platform::host_free(void* pointer) {
  {
    std::lock_guard<std::mutex> lock(host_mutex_);
    host_blocks_.erase(static_cast<const char*>(pointer));
  }
  std::free(pointer);
}

bool Platform::is_host_pinned(const void* pointer) const {
  std::lock_guard<std::mutex> lock(host_mutex_);
  auto it = host_blocks_.upper_bound(static_cast<const char*>(pointer));
  if (it == host_blocks_.begin()) {
    return false;
  }
  --it;
  return static_cast<const char*>(pointer) < it->first + it->second;
}

Stream& Platform::default_stream(int device_index) { return stream(device_index, 0); }

Platform::Device& Platform::device_with_streams(int device_index, std::unique_lock<std::mutex>& lock) {
  Device& dev = device(device_index);
  mark_initialized();
  lock = std::unique_lock<std::mutex>(dev.streams_mutex);
  if (dev.streams.empty()) {
    dev.streams.push_back(std::make_unique<Stream>(device_index, 0, 0));
  }
  return dev;
}

Stream& Platform::stream(int device_index, int64_t id) {
  std::unique_lock<std::mutex> lock;
  Device& dev = device_with_streams(device_index, lock);
  if (id < 0 || id >= static_cast<int64_t>(dev.streams.size())) {
    throw RuntimeError("Unknown stream id " + std::to_string(id) + " on " + name_ + ":" +
                       std::to_string(device_index) + ".");
  }
  return *dev.streams[id];
}

std::unique_ptr<Stream> Platform::create_stream(int device_index, int priority) {
  check_device(device_index);
  mark_initialized();
  return std::make_unique<Stream>(device_index, next_created_stream_id_.fetch_add(1), priority);
}

Stream& Platform::pool_stream(int device_index, int priority) {
  std::unique_lock<std::mutex> lock;
  Device& dev = device_with_streams(device_index, lock);
  if (dev.streams.size() <= kStreamPoolSize) {
    const auto id = static_cast<int64_t>(dev.streams.size());
    dev.streams.push_back(std::make_unique<Stream>(device_index, id, priority));
    return *dev.streams.back();
  }
  const unsigned slot = 1 + (dev.next_pool_stream++ % kStreamPoolSize);
  return *dev.streams[slot];
}

void Platform::memcpy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) {
    return;  // an empty tensor's pointers may be null, which std::memcpy must not see
  }
  KernelAccess access{dst, src};
  std::memcpy(dst, src, bytes);
}

namespace {

// The simulated copy engine moves a large copy in lanes, one per core the
// process may run on (up to four), as a DMA engine's channels share a
// transfer: a host memcpy is one core's bandwidth, which the CPU's own
// multi-threaded copy_ exceeds.
constexpr size_t kBytesPerLane = size_t{8} << 20;
constexpr size_t kMaxLanes = 4;

size_t usable_cores() {
  cpu_set_t cores;
  CPU_ZERO(&cores);
  if (sched_getaffinity(0, sizeof cores, &cores) != 0) {
    return 1;
  }
  return static_cast<size_t>(std::max(1, CPU_COUNT(&cores)));
}

void copy_in_lanes(void* dst, const void* src, size_t bytes) {
  // Small copies (most) ask the kernel for nothing.
  const size_t lanes = bytes < 2 * kBytesPerLane ? 1 : std::min({usable_cores(), kMaxLanes, bytes / kBytesPerLane});
  if (lanes <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  const size_t lane_bytes = (bytes / lanes + 63) & ~size_t{63};  // cache-line aligned splits
  auto copy_lane = [dst, src, bytes, lane_bytes](size_t lane) {
    const size_t begin = lane * lane_bytes;
    if (begin < bytes) {
      std::memcpy(static_cast<char*>(dst) + begin, static_cast<const char*>(src) + begin,
                  std::min(lane_bytes, bytes - begin));
    }
  };
  std::vector<std::thread> helpers;
  for (size_t lane = 1; lane < lanes; ++lane) {
    try {
      helpers.emplace_back(copy_lane, lane);
    } catch (const std::system_error&) {  // no thread to be had: this lane here
      copy_lane(lane);
    }
  }
  copy_lane(0);
  for (std::thread& helper : helpers) {
    helper.join();
  }
}

}  // namespace

void Platform::memcpy_async(void* dst, const void* src, size_t bytes, Stream& stream) {
  if (bytes == 0) {
    return;
  }
  stream.enqueue([dst, src, bytes] {
    KernelAccess access{dst, src};
    copy_in_lanes(dst, src, bytes);
  });
}

}  // namespace torchplug::runtime
