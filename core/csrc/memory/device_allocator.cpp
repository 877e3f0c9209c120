#include "memory/device_allocator.h"

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <c10/util/Exception.h>

#include "backend/backend.h"
#include "launch/stream_trace.h"
#include "launch/worker_thread.h"
#include "driver/event.h"
#include "driver/memory_access.h"
#include "driver/stream.h"
#include "memory/segment_source.h"
#include "memory/worker_scratch.h"
#include "registration/kernels.h"

namespace torchplug {
namespace {

using c10::CachingAllocator::StatType;
using c10::CachingDeviceAllocator::DeviceStats;

constexpr size_t kSmallRequest = size_t{1} << 20;  // served from the small pool
constexpr size_t kSmallRound = 512;
constexpr size_t kLargeRound = size_t{2} << 20;

size_t rounded_size(size_t bytes) {
  const size_t unit = bytes <= kSmallRequest ? kSmallRound : kLargeRound;
  return bytes == 0 ? unit : (bytes + unit - 1) / unit * unit;
}

StatType pool_of(size_t block_size) {
  return block_size <= kSmallRequest ? StatType::SMALL_POOL : StatType::LARGE_POOL;
}

void increase(c10::CachingAllocator::StatArray& stat, StatType pool, size_t amount) {
  stat[static_cast<size_t>(StatType::AGGREGATE)].increase(amount);
  stat[static_cast<size_t>(pool)].increase(amount);
}

void decrease(c10::CachingAllocator::StatArray& stat, StatType pool, size_t amount) {
  stat[static_cast<size_t>(StatType::AGGREGATE)].decrease(amount);
  stat[static_cast<size_t>(pool)].decrease(amount);
}

}  // namespace

class CachingDeviceAllocator final : public c10::DeviceAllocator {
 public:
  struct Block {
    CachingDeviceAllocator* owner;
    void* pointer;
    size_t size;       // rounded size held from the device
    size_t requested;  // what the caller asked for
    c10::DeviceIndex device;
    c10::StreamId stream;                       // stream it was allocated on
    std::unordered_set<c10::StreamId> used_on;  // other streams (record_stream)
    std::vector<std::unique_ptr<driver::Event>> pending;       // work on used_on at free time
    bool adopted = false;
    c10::DataPtr adopted_data;                  // owner of adopted host memory
    c10::MempoolId_t pool{0, 0};                // the private pool it belongs to, or {0, 0}
    std::shared_ptr<const SegmentSource> source;  // whose memory it is: a pluggable allocator's, or the driver's
    // Where in its stream's order it was freed: the stream's issued() when
    // the host freed it, 0 when a queued kernel did (in the stream's order).
    // Kernels queued before a host's free may still read the block; a queued
    // kernel's own allocations (a CPU kernel's temporary) reuse it only if the
    // kernel was queued after the free.
    uint64_t freed_at_issue = 0;
  };

  explicit CachingDeviceAllocator(c10::DeviceType type) : type_(type) {}

  c10::DataPtr allocate(size_t nbytes) override {
    // Every tensor with storage on the device is allocated here first.
    ensure_kernels_registered(type_);
    const c10::DeviceIndex device = checked_device_index(type_, -1);
    if (nbytes == 0) {
      return c10::DataPtr(nullptr, c10::Device(type_, device));
    }
    Block* block = take_block(device, nbytes);
    return c10::DataPtr(block->pointer, block, &free_block, c10::Device(type_, device));
  }

  static bool allocated_here(const c10::DataPtr& data) { return data.get_deleter() == &free_block; }

  // Host memory becomes device memory without a copy only on the simulator,
  // whose device memory is host memory the host allocated; another driver's
  // device gets a copy by the driver in memory it allocated, in the current
  // stream's order (the block may still be read by work queued before). The
  // host memory lives until the stream has run the copy.
  c10::DataPtr copy_of(c10::DataPtr host_data, size_t nbytes, c10::Device device) {
    if (nbytes == 0) {
      return c10::DataPtr(nullptr, device);
    }
    Block* block = take_block(device.index(), nbytes);
    const driver::Stream& stream = runtime().stream(device.index(), current_stream(device).id());
    stream.copy_async(block->pointer, host_data.get(), nbytes, TPD_COPY_HOST_TO_DEVICE);
    stream.enqueue([source = std::make_shared<c10::DataPtr>(std::move(host_data))] {});
    return c10::DataPtr(block->pointer, block, &free_block, device);
  }

  // On the simulator, whose device memory is host memory, with a pluggable
  // allocator serving `device` (whose memory the driver does not know, so its
  // copies refuse it): the host data is copied in the current stream's order
  // (the block may still be read by work queued before), or at once on the
  // stream's worker, which runs in that order.
  c10::DataPtr copy_into_pluggable_memory(c10::DataPtr host_data, size_t nbytes, c10::Device device) {
    if (nbytes == 0) {
      return c10::DataPtr(nullptr, device);
    }
    Block* block = take_block(device.index(), nbytes);
    void* destination = block->pointer;
    if (on_stream_worker_thread()) {
      std::memcpy(destination, host_data.get(), nbytes);
    } else {
      const driver::Stream& stream = runtime().stream(device.index(), current_stream(device).id());
      stream.enqueue([destination, nbytes, source = std::make_shared<c10::DataPtr>(std::move(host_data))] {
        std::memcpy(destination, source->get(), nbytes);
      });
    }
    return c10::DataPtr(block->pointer, block, &free_block, device);
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  // A synchronous copy between two allocations of this allocator (torch's
  // Allocator::clone, e.g. materialising a copy-on-write storage).
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count == 0) {
      return;  // an empty block's pointers may be null, which std::memcpy must not see
    }
    if (!backend(type_).host_addressable) {
      translate_runtime_errors([&] {
        const c10::Device device(type_, static_cast<c10::DeviceIndex>(runtime().device_of(src)));
        const driver::Stream& stream = runtime().stream(device.index(), current_stream(device).id());
        stream.copy_async(dest, src, count, TPD_COPY_DEVICE_TO_DEVICE);
        stream.synchronize();
      });
      return;
    }
    const driver::MemoryAccess access{dest, src};
    std::memcpy(dest, src, count);
  }

  bool initialized() override { return runtime().initialized(); }

  void emptyCache(c10::MempoolId_t /*mempool_id*/) override {
    // Cached memory goes back to the device only once no queued kernel can still touch it.
    for (int device = 0; device < runtime().device_count(); ++device) {
      if (runtime().initialized() && !on_stream_worker_thread()) {
        translate_runtime_errors([&] { runtime().wait_idle(device); });
      }
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (size_t device = 0; device < per_device_.size(); ++device) {
      release_cached(static_cast<c10::DeviceIndex>(device));
    }
    release_worker_scratch();  // the host buffers queued kernels' CPU code keeps
  }

  void recordStream(const c10::DataPtr& data, c10::Stream stream) override {
    if (data.get_deleter() != &free_block) {
      return;
    }
    auto* block = static_cast<Block*>(data.get_context());
    // Checked here too for callers below the record_stream kernel
    // (recordDataPtrOnStream): the block keeps only a stream id, which must be
    // one of its own device's, or the free would look it up on the wrong one.
    TORCH_CHECK(stream.device_type() == type_ && stream.device_index() == block->device,
                "Cannot record memory of ", c10::Device(type_, block->device), " on stream ", stream.id(), " of ",
                stream.device(), ": record it on a stream of its own device.");
    trace_stream_order({TraceKind::kMemoryRecordStream, c10::Device(type_, block->device), stream.id(),
                        reinterpret_cast<uintptr_t>(block->pointer)});
    std::lock_guard<std::mutex> lock(mutex_);
    if (stream.id() != block->stream) {
      block->used_on.insert(stream.id());
    }
  }

  DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    return state(checked_device_index(type_, device)).stats;
  }

  void resetAccumulatedStats(c10::DeviceIndex device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceStats& stats = state(checked_device_index(type_, device)).stats;
    for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
                        &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.inactive_split_bytes, &stats.requested_bytes}) {
      for (auto& stat : *array) {
        stat.reset_accumulated();
      }
    }
    stats.num_alloc_retries = 0;
    stats.num_ooms = 0;
    stats.num_device_alloc = 0;
    stats.num_device_free = 0;
  }

  void resetPeakStats(c10::DeviceIndex device) override {
    std::lock_guard<std::mutex> lock(mutex_);
    const c10::DeviceIndex index = checked_device_index(type_, device);
    DeviceStats& stats = state(index).stats;
    for (auto* array : {&stats.allocation, &stats.segment, &stats.active, &stats.inactive_split,
                        &stats.allocated_bytes, &stats.reserved_bytes, &stats.active_bytes,
                        &stats.inactive_split_bytes, &stats.requested_bytes}) {
      for (auto& stat : *array) {
        stat.reset_peak();
      }
    }
    translate_runtime_errors([&] { runtime().stats(index, /*reset_peak=*/true); });
  }

  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override {
    const c10::DeviceIndex index = checked_device_index(type_, device);
    uint64_t free_bytes = 0;
    uint64_t total_bytes = 0;
    translate_runtime_errors([&] { runtime().memory_info(index, free_bytes, total_bytes); });
    return {static_cast<size_t>(free_bytes), static_cast<size_t>(total_bytes)};
  }

  // Routes the allocations on `stream` of `device` (or, without a stream, of
  // the calling thread) to private pool `pool`, which it uses (retain_pool).
  void begin_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool, std::optional<c10::StreamId> stream) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& dev = state(device);
    ++dev.pools[pool].users;
    dev.routes.push_back({pool, stream, std::this_thread::get_id()});
  }

  void end_allocate_to_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto& routes = state(device).routes;
    for (size_t i = routes.size(); i-- > 0;) {
      if (routes[i].pool == pool) {
        routes.erase(routes.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      }
    }
  }

  void retain_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++state(device).pools[pool].users;
  }

  // Drops a use of `pool`; with the last, its free memory joins the default
  // pool (and its blocks still in use join it when freed).
  void release_pool(c10::DeviceIndex device, c10::MempoolId_t pool) {
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& dev = state(device);
    auto found = dev.pools.find(pool);
    if (found == dev.pools.end() || --found->second.users > 0) {
      return;
    }
    Cache cached = std::move(found->second.cached);
    dev.pools.erase(found);
    for (auto& [size, blocks] : cached) {
      for (Block* block : blocks) {
        block->pool = {0, 0};
        if (block->source != nullptr) {
          give_back(dev, block);
        } else {
          dev.cached[size].push_back(block);
        }
      }
    }
  }

  void set_memory_fraction(c10::DeviceIndex device, double fraction) {
    std::lock_guard<std::mutex> lock(mutex_);
    state(checked_device_index(type_, device)).memory_fraction = fraction;
  }

  double memory_fraction(c10::DeviceIndex device) {
    std::lock_guard<std::mutex> lock(mutex_);
    return state(checked_device_index(type_, device)).memory_fraction;
  }

  // From now on every allocation of the default pool is a segment of
  // `source`, given back to it when freed (uncached, as CUDA's pluggable
  // allocators are); private pools without a source of their own cache its
  // segments. Only before the first allocation.
  void use_source(std::shared_ptr<const SegmentSource> source) {
    std::lock_guard<std::mutex> lock(mutex_);
    const std::string name = c10::DeviceTypeName(type_, /*lower_case=*/true);
    TORCH_CHECK(current_source_ == nullptr, "torch.", name, ".memory.change_current_allocator was called already (with ",
                current_source_->name, "); the allocator of a device type changes once per process.");
    for (size_t device = 0; device < per_device_.size(); ++device) {
      const auto reserved = per_device_[device].stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
      TORCH_CHECK(reserved == 0, "torch.", name, ".memory.change_current_allocator must run before the first ", name,
                  " tensor is allocated, but ", name, ":", device, " holds ", reserved,
                  " bytes from the caching allocator already: call it first thing in the program.");
    }
    current_source_ = std::move(source);
    has_sources_.store(true);
  }

  // The segments of private pool `pool` come from `source` (a MemPool's allocator).
  void set_pool_source(c10::DeviceIndex device, c10::MempoolId_t pool, std::shared_ptr<const SegmentSource> source) {
    std::lock_guard<std::mutex> lock(mutex_);
    PrivatePool& private_pool = state(device).pools[pool];
    TORCH_CHECK(private_pool.cached.empty(), "A pool's allocator is set before anything is allocated from the pool.");
    private_pool.source = std::move(source);
    has_sources_.store(true);
  }

  c10::DataPtr adopt(c10::DataPtr host_data, size_t nbytes, c10::Device device) {
    if (!runtime().is_simulator()) {
      return copy_of(std::move(host_data), nbytes, device);
    }
    if (pluggable_allocator_serves(device)) {
      return copy_into_pluggable_memory(std::move(host_data), nbytes, device);
    }
    {
      std::unique_lock<std::mutex> lock(mutex_);
      ensure_within_fraction(device.index(), nbytes, lock);
    }
    translate_runtime_errors([&] { runtime().adopt(device.index(), nbytes); });
    // Made for the current stream's kernel, as take_block's are: frees are
    // traced against this stream, so the stream sanitizer checks the right one.
    const c10::StreamId stream = current_stream(device).id();
    auto* block = new Block{this, host_data.get(), nbytes, nbytes, device.index(), stream, {}, {}, true,
                            std::move(host_data)};
    {
      std::lock_guard<std::mutex> lock(mutex_);
      DeviceStats& stats = state(device.index()).stats;
      count_segment(stats, nbytes, /*add=*/true);
      count_use(stats, *block, /*add=*/true);
    }
    return c10::DataPtr(block->pointer, block, &free_block, device);
  }

 private:
  using Cache = std::unordered_map<size_t, std::vector<Block*>>;  // free blocks by rounded size
  // A private pool: memory that only the allocations routed to it reuse (a
  // graph's, which its replays write), until its last user releases it.
  struct PrivatePool {
    Cache cached;
    int users = 0;
    std::shared_ptr<const SegmentSource> source;  // null: the current source
  };
  // Allocations on `stream` (a capture) or by `thread` (use_mem_pool) go to `pool`.
  struct Route {
    c10::MempoolId_t pool;
    std::optional<c10::StreamId> stream;
    std::thread::id thread;
  };
  struct DeviceState {
    DeviceStats stats;
    Cache cached;                                            // the default pool's
    std::map<c10::MempoolId_t, PrivatePool> pools;
    std::vector<Route> routes;
    std::vector<Block*> awaiting_streams;                   // freed, used on busy streams
    double memory_fraction = 1.0;                           // of the capacity this process may reserve
  };

  driver::DeviceRuntime& runtime() const { return device_runtime(type_); }

  // The pool an allocation on `stream` by this thread comes from: the latest
  // route that matches it, else the default pool. Caller holds mutex_.
  static c10::MempoolId_t routed_pool(const DeviceState& dev, c10::StreamId stream) {
    for (auto route = dev.routes.rbegin(); route != dev.routes.rend(); ++route) {
      if (route->stream.has_value() ? *route->stream == stream : route->thread == std::this_thread::get_id()) {
        return route->pool;
      }
    }
    return {0, 0};
  }

  // Where free blocks of `pool` are kept: a released pool's go to the default pool.
  static Cache& cache_of(DeviceState& dev, c10::MempoolId_t pool) {
    if (pool != c10::MempoolId_t{0, 0}) {
      auto found = dev.pools.find(pool);
      if (found != dev.pools.end()) {
        return found->second.cached;
      }
    }
    return dev.cached;
  }

  // Where new segments of `pool` come from: the pool's own source, else the
  // device type's current one; null is the driver. Caller holds mutex_.
  std::shared_ptr<const SegmentSource> source_of(const DeviceState& dev, c10::MempoolId_t pool) const {
    if (pool != c10::MempoolId_t{0, 0}) {
      auto found = dev.pools.find(pool);
      if (found != dev.pools.end() && found->second.source != nullptr) {
        return found->second.source;
      }
    }
    return current_source_;
  }

  // Whether an allocation on `device`'s current stream now comes from a
  // pluggable allocator: then the host memory of a CPU kernel's output is
  // copied into it rather than adopted, so that all memory is the allocator's.
  bool pluggable_allocator_serves(c10::Device device) {
    if (!has_sources_.load(std::memory_order_relaxed)) {
      return false;  // the common case, on every adopted output: no lock
    }
    const c10::StreamId stream = current_stream(device).id();
    std::lock_guard<std::mutex> lock(mutex_);
    const DeviceState& dev = state(device.index());
    return source_of(dev, routed_pool(dev, stream)) != nullptr;
  }

  // A block from a pluggable allocator goes back to it when freed, unless a
  // live private pool caches it.
  static bool returns_to_source(const DeviceState& dev, const Block& block) {
    return block.source != nullptr &&
           (block.pool == c10::MempoolId_t{0, 0} || dev.pools.find(block.pool) == dev.pools.end());
  }

  DeviceState& state(c10::DeviceIndex device) {
    if (per_device_.size() <= static_cast<size_t>(device)) {
      per_device_.resize(device + 1);
    }
    return per_device_[device];
  }

  static void count_segment(DeviceStats& stats, size_t size, bool add) {
    const StatType pool = pool_of(size);
    if (add) {
      increase(stats.segment, pool, 1);
      increase(stats.reserved_bytes, pool, size);
      ++stats.num_device_alloc;
    } else {
      decrease(stats.segment, pool, 1);
      decrease(stats.reserved_bytes, pool, size);
      ++stats.num_device_free;
    }
  }

  static void count_use(DeviceStats& stats, const Block& block, bool add) {
    const StatType pool = pool_of(block.size);
    auto change = add ? &increase : &decrease;
    change(stats.allocation, pool, 1);
    change(stats.active, pool, 1);
    change(stats.allocated_bytes, pool, block.size);
    change(stats.active_bytes, pool, block.size);
    change(stats.requested_bytes, pool, block.requested);
  }

  Block* take_block(c10::DeviceIndex device, size_t nbytes) {
    const size_t size = rounded_size(nbytes);
    translate_runtime_errors([&] { runtime().check_usable(); });
    const c10::StreamId stream = current_stream(c10::Device(type_, device)).id();
    std::unique_lock<std::mutex> lock(mutex_);
    DeviceState& dev = state(device);
    reclaim_finished(dev);
    const c10::MempoolId_t pool = routed_pool(dev, stream);
    std::shared_ptr<const SegmentSource> source = source_of(dev, pool);
    const bool uncached = source != nullptr && pool == c10::MempoolId_t{0, 0};
    Cache& cached = cache_of(dev, pool);
    Block* block = nullptr;
    auto it = uncached ? cached.end() : cached.find(size);
    if (it != cached.end()) {
      // Prefer a block last used on this stream: reuse needs no synchronisation.
      auto& blocks = it->second;
      const uint64_t queued_at = on_stream_worker_thread() ? running_kernel_issue() : UINT64_MAX;
      for (size_t i = blocks.size(); i-- > 0;) {
        if (blocks[i]->stream == stream && blocks[i]->freed_at_issue < queued_at) {
          block = blocks[i];
          blocks.erase(blocks.begin() + static_cast<std::ptrdiff_t>(i));
          break;
        }
      }
    }
    if (block == nullptr) {
      block = source != nullptr ? new_source_block(device, uncached ? nbytes : size, stream, std::move(source))
                                : new_block(device, size, lock);
    }
    block->requested = nbytes;
    block->stream = stream;
    block->pool = pool;
    count_use(dev.stats, *block, /*add=*/true);
    return block;
  }

  // The per-process memory fraction caps reserved memory below the device's
  // capacity; the cache is given back first if that makes room, as with CUDA.
  // Caller holds mutex_ through `lock`.
  void ensure_within_fraction(c10::DeviceIndex device, size_t size, std::unique_lock<std::mutex>& lock) {
    DeviceState& dev = state(device);
    if (dev.memory_fraction >= 1.0) {
      return;
    }
    const size_t capacity = translate_runtime_errors([&] { return runtime().capacity(device); });
    const auto limit = static_cast<size_t>(dev.memory_fraction * static_cast<double>(capacity));
    auto reserved = [&] {
      return static_cast<size_t>(dev.stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current);
    };
    if (reserved() + size <= limit) {
      return;
    }
    ++dev.stats.num_alloc_retries;
    wait_for_queued_kernels(device, lock);
    release_cached(device);
    if (reserved() + size <= limit) {
      return;
    }
    ++dev.stats.num_ooms;
    constexpr double kMiB = 1024.0 * 1024.0;
    TORCH_CHECK_WITH(OutOfMemoryError, false, c10::Device(type_, device), " out of memory: tried to allocate ",
                     static_cast<double>(size) / kMiB, " MiB, but the per-process memory fraction ",
                     dev.memory_fraction, " limits this process to ", static_cast<double>(limit) / kMiB,
                     " MiB of the device's ", static_cast<double>(capacity) / kMiB, " MiB, and ",
                     static_cast<double>(reserved()) / kMiB,
                     " MiB are in use. Free tensors, or raise the limit with torch.",
                     c10::DeviceTypeName(type_, /*lower_case=*/true), ".set_per_process_memory_fraction().");
  }

  // Lets the kernels queued on `device` finish, since they may use memory the
  // cache would give back, with mutex_ released (they may allocate). Not on a
  // stream worker, which would wait for itself.
  void wait_for_queued_kernels(c10::DeviceIndex device, std::unique_lock<std::mutex>& lock) {
    if (on_stream_worker_thread() || translate_runtime_errors([&] { return runtime().idle(device); })) {
      return;
    }
    lock.unlock();
    translate_runtime_errors([&] { runtime().wait_idle(device); });
    lock.lock();
  }

  Block* new_block(c10::DeviceIndex device, size_t size, std::unique_lock<std::mutex>& lock) {
    DeviceState& dev = state(device);
    ensure_within_fraction(device, size, lock);
    void* pointer = nullptr;
    try {
      bool injected = false;
      try {
        pointer = runtime().malloc(device, size, &injected);
      } catch (const driver::DriverError& error) {
        if (error.code() != TPD_OUT_OF_MEMORY || injected) {
          ++dev.stats.num_ooms;
          throw;
        }
        // Give the cache back to the device and try once more, as CUDA's allocator does.
        ++dev.stats.num_alloc_retries;
        wait_for_queued_kernels(device, lock);
        release_cached(device);
        try {
          pointer = runtime().malloc(device, size);
        } catch (const driver::DriverError&) {
          ++dev.stats.num_ooms;
          throw;
        }
      }
    } catch (const driver::DriverError&) {
      translate_runtime_errors([]() -> void { throw; });
    }
    count_segment(dev.stats, size, /*add=*/true);
    return new Block{this, pointer, size, size, device, 0, {}, {}, false, {}};
  }

  Block* new_source_block(c10::DeviceIndex device, size_t size, c10::StreamId stream,
                          std::shared_ptr<const SegmentSource> source) {
    DeviceState& dev = state(device);
    void* handle = translate_runtime_errors([&] { return runtime().stream(device, stream).handle(); });
    void* pointer = source->allocate(size, device, handle);
    if (pointer == nullptr) {
      ++dev.stats.num_ooms;
      TORCH_CHECK_WITH(OutOfMemoryError, false, c10::Device(type_, device),
                       " out of memory: the pluggable allocator ", source->name, " returned no memory for ", size,
                       " bytes. Free tensors, or give the allocator more memory.");
    }
    count_segment(dev.stats, size, /*add=*/true);
    return new Block{this, pointer, size, size, device, stream, {}, {}, false, {}, {0, 0}, std::move(source)};
  }

  // Gives `block` back to its pluggable allocator once the work queued on its
  // streams has run. Caller holds mutex_.
  void give_back(DeviceState& dev, Block* block) {
    translate_runtime_errors([&] {
      driver::Stream& stream = runtime().stream(block->device, block->stream);
      if (!stream.query()) {
        block->pending.push_back(std::make_unique<driver::Event>());
        block->pending.back()->record(runtime(), stream);
      }
    });
    if (block->pending.empty()) {
      return_to_source(dev, block);
    } else {
      dev.awaiting_streams.push_back(block);
    }
  }

  void return_to_source(DeviceState& dev, Block* block) {
    void* handle = translate_runtime_errors([&] { return runtime().stream(block->device, block->stream).handle(); });
    block->source->free(block->pointer, block->size, block->device, handle);
    count_segment(dev.stats, block->size, /*add=*/false);
    delete block;
  }

  // Returns cached (unused) blocks of `device` to the runtime. Caller holds mutex_.
  void release_cached(c10::DeviceIndex device) {
    DeviceState& dev = state(device);
    reclaim_finished(dev);
    if (!translate_runtime_errors([&] { return runtime().idle(device); })) {
      return;  // a queued kernel may still use cached memory (a freed tensor's); it stays cached
    }
    for (auto& [size, blocks] : dev.cached) {
      for (Block* block : blocks) {
        translate_runtime_errors([&] { runtime().free(block->pointer); });
        count_segment(dev.stats, block->size, /*add=*/false);
        delete block;
      }
    }
    dev.cached.clear();
  }

  // Moves blocks whose pending stream work has finished into the cache.
  void reclaim_finished(DeviceState& dev) {
    if (dev.awaiting_streams.empty()) {
      return;
    }
    auto& waiting = dev.awaiting_streams;
    for (size_t i = waiting.size(); i-- > 0;) {
      Block* block = waiting[i];
      bool done = true;
      for (const auto& event : block->pending) {
        done = done && translate_runtime_errors([&] { return event->query(); });
      }
      if (done) {
        block->pending.clear();
        waiting.erase(waiting.begin() + static_cast<std::ptrdiff_t>(i));
        if (block->adopted) {
          delete_adopted(dev, block);
        } else if (returns_to_source(dev, *block)) {
          return_to_source(dev, block);
        } else {
          cache_of(dev, block->pool)[block->size].push_back(block);
        }
      }
    }
  }

  void delete_adopted(DeviceState& dev, Block* block) {
    count_segment(dev.stats, block->size, /*add=*/false);
    translate_runtime_errors([&] { runtime().release_adopted(block->device, block->size); });
    delete block;  // frees the host memory through its own deleter
  }

  // How much work was queued on `block`'s stream when it is freed now (see Block::freed_at_issue).
  uint64_t issued_before_free(const Block& block) noexcept {
    if (on_stream_worker_thread()) {
      return 0;
    }
    try {
      const c10::Device device(type_, block.device);
      const c10::Stream current = current_stream(device);
      return current.id() == block.stream ? runtime_stream(current).issued()
                                          : runtime().stream(block.device, block.stream).issued();
    } catch (...) {
      return UINT64_MAX;  // never reused by a queued kernel's own allocations
    }
  }

  void release(Block* block) {
    trace_stream_order({TraceKind::kMemoryFree, c10::Device(type_, block->device), block->stream,
                        reinterpret_cast<uintptr_t>(block->pointer)});
    const uint64_t freed_at_issue = issued_before_free(*block);
    std::lock_guard<std::mutex> lock(mutex_);
    DeviceState& dev = state(block->device);
    count_use(dev.stats, *block, /*add=*/false);
    if (block->adopted) {
      // Host memory that is freed outright: not while a queued kernel may read it.
      translate_runtime_errors([&] {
        for (driver::Stream* stream : runtime().streams(block->device)) {
          if (!stream->query()) {
            block->pending.push_back(std::make_unique<driver::Event>());
            block->pending.back()->record(runtime(), *stream);
          }
        }
      });
      if (block->pending.empty()) {
        delete_adopted(dev, block);
      } else {
        dev.awaiting_streams.push_back(block);
      }
      return;
    }
    // Memory used on other streams is reused only after their queued work ends.
    translate_runtime_errors([&] {
      for (c10::StreamId id : block->used_on) {
        driver::Stream& stream = runtime().stream(block->device, id);
        if (!stream.query()) {
          block->pending.push_back(std::make_unique<driver::Event>());
          block->pending.back()->record(runtime(), stream);
        }
      }
    });
    block->used_on.clear();
    block->freed_at_issue = freed_at_issue;
    if (returns_to_source(dev, *block)) {
      give_back(dev, block);
    } else if (block->pending.empty()) {
      cache_of(dev, block->pool)[block->size].push_back(block);
    } else {
      dev.awaiting_streams.push_back(block);
    }
  }

  // A DataPtr's deleter runs inside destructors (a tensor freed by Python, a
  // queued kernel retired on a worker): an exception escaping it would
  // terminate the process. What fails here is reported and the block is
  // kept (leaked) rather than reused while work may still touch it.
  static void free_block(void* context) noexcept {
    auto* block = static_cast<Block*>(context);
    try {
      block->owner->release(block);
    } catch (const std::exception& error) {
      report_failed_free(block, error.what());
    } catch (...) {
      report_failed_free(block, "unknown error");
    }
  }

  static void report_failed_free(const Block* block, const char* reason) noexcept {
    try {
      TORCH_WARN("torchplug could not free a block of ", block->size, " bytes of ",
                 c10::Device(block->owner->type_, block->device), " (", reason,
                 "); it stays allocated. Please report this as a torchplug bug.");
    } catch (...) {  // NOLINT(bugprone-empty-catch): nothing left to report with
    }
  }

  const c10::DeviceType type_;
  std::mutex mutex_;
  std::shared_ptr<const SegmentSource> current_source_;  // change_current_allocator's, or null
  std::atomic<bool> has_sources_{false};                 // whether any pluggable allocator was installed
  std::deque<DeviceState> per_device_;  // grows at the end; a state keeps its address
};

namespace {
std::array<std::unique_ptr<CachingDeviceAllocator>,
           static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
    allocators;
}  // namespace

CachingDeviceAllocator& caching_allocator(c10::DeviceType type) {
  static std::mutex creation_mutex;
  auto& slot = allocators[static_cast<size_t>(type)];
  if (!slot) {
    std::lock_guard<std::mutex> lock(creation_mutex);
    if (!slot) {
      slot = std::make_unique<CachingDeviceAllocator>(type);
      c10::SetAllocator(type, slot.get());
    }
  }
  return *slot;
}

c10::DeviceAllocator& device_allocator(c10::DeviceType type) { return caching_allocator(type); }

namespace {
// A pluggable allocator's memory is host memory its library allocated, unless
// the library allocates through the driver: only a device whose memory the
// host addresses takes the former.
void check_pluggable(c10::DeviceType type, const SegmentSource& source) {
  const BackendIdentity& identity = backend(type);
  TORCH_CHECK(identity.host_addressable || source.driver_memory, "The pluggable allocator ", source.name,
              " returns host memory, but ", identity.name, "'s driver (", device_runtime(type).library().name(),
              ") keeps its memory on the device: give PluggableAllocator an init_fn_name, a function torchplug "
              "calls with the driver's API and client, and allocate through the driver's memory_allocate.");
}
}  // namespace

bool allocated_by_device_allocator(const c10::DataPtr& data) { return CachingDeviceAllocator::allocated_here(data); }

void set_memory_fraction(c10::DeviceType type, c10::DeviceIndex device, double fraction) {
  caching_allocator(type).set_memory_fraction(device, fraction);
}

double memory_fraction(c10::DeviceType type, c10::DeviceIndex device) {
  return caching_allocator(type).memory_fraction(device);
}

void begin_allocate_to_pool(c10::Device device, c10::MempoolId_t pool, std::optional<c10::StreamId> stream) {
  caching_allocator(device.type()).begin_allocate_to_pool(device.index(), pool, stream);
}

void end_allocate_to_pool(c10::Device device, c10::MempoolId_t pool) {
  caching_allocator(device.type()).end_allocate_to_pool(device.index(), pool);
}

void retain_pool(c10::Device device, c10::MempoolId_t pool) {
  caching_allocator(device.type()).retain_pool(device.index(), pool);
}

void release_pool(c10::Device device, c10::MempoolId_t pool) {
  caching_allocator(device.type()).release_pool(device.index(), pool);
}

c10::MempoolId_t new_pool_id() {
  static std::atomic<c10::CaptureId_t> next{1};
  return {0, next.fetch_add(1)};
}

void use_segment_source(c10::DeviceType type, std::shared_ptr<const SegmentSource> source) {
  check_pluggable(type, *source);
  caching_allocator(type).use_source(std::move(source));
}

void set_pool_source(c10::Device device, c10::MempoolId_t pool, std::shared_ptr<const SegmentSource> source) {
  check_pluggable(device.type(), *source);
  caching_allocator(device.type()).set_pool_source(device.index(), pool, std::move(source));
}

c10::DataPtr adopt_as_device_memory(c10::DataPtr host_data, size_t nbytes, c10::Device device) {
  return caching_allocator(device.type()).adopt(std::move(host_data), nbytes, device);
}

}  // namespace torchplug
