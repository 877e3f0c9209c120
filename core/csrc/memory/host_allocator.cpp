#include "memory/host_allocator.h"

#include <array>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"

namespace torchplug {
namespace {

void release(void* pointer) noexcept;

int64_t microseconds_since(std::chrono::steady_clock::time_point started) {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - started).count();
}

// Caches freed pinned blocks by size, since pinning is costly on real devices
// and pinned buffers are typically reused at one size by data loaders.
class PinnedHostAllocator final : public at::HostAllocator {
 public:
  explicit PinnedHostAllocator(c10::DeviceType type) : type_(type) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes == 0) {
      return c10::DataPtr(nullptr, c10::Device(c10::kCPU));
    }
    void* pointer = take_cached(nbytes);
    if (pointer == nullptr) {
      const auto started = std::chrono::steady_clock::now();
      pointer = translate_runtime_errors([&] { return device_runtime(type_).host_malloc(nbytes); });
      const int64_t microseconds = microseconds_since(started);
      std::lock_guard<std::mutex> lock(mutex_);
      sizes_[pointer] = nbytes;
      stats_.allocations.increase(1);
      stats_.allocated_bytes.increase(nbytes);
      stats_.host_alloc_time.increase(microseconds);
      ++stats_.num_host_alloc;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    stats_.active_requests.increase(1);
    stats_.active_bytes.increase(nbytes);
    return c10::DataPtr(pointer, pointer, &release, c10::Device(c10::kCPU));
  }

  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    if (count > 0) {  // an empty block's pointers may be null
      std::memcpy(dest, src, count);
    }
  }

  bool record_event(void* /*ptr*/, void* /*ctx*/, c10::Stream /*stream*/) override {
    // Copies from pinned memory hold their own reference to the source
    // storage until they complete, so reuse needs no event.
    return true;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& [size, blocks] : cached_) {
      for (void* pointer : blocks) {
        const auto started = std::chrono::steady_clock::now();
        device_runtime(type_).host_free(pointer);
        stats_.host_free_time.increase(microseconds_since(started));
        sizes_.erase(pointer);
        stats_.allocations.decrease(1);
        stats_.allocated_bytes.decrease(size);
        ++stats_.num_host_free;
      }
    }
    cached_.clear();
  }

  at::HostStats get_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    return stats_;
  }

  void reset_accumulated_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat([](auto& stat) { stat.reset_accumulated(); });
    stats_.num_host_alloc = 0;
    stats_.num_host_free = 0;
  }

  void reset_peak_stats() override {
    std::lock_guard<std::mutex> lock(mutex_);
    for_each_stat([](auto& stat) { stat.reset_peak(); });
  }

  // Returns the block to the cache if this allocator made it.
  bool take_back(void* pointer) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = sizes_.find(pointer);
    if (it == sizes_.end()) {
      return false;
    }
    cached_[it->second].push_back(pointer);
    stats_.active_requests.decrease(1);
    stats_.active_bytes.decrease(it->second);
    return true;
  }

 private:
  // Calls `visit` on every statistic with a peak (counts and durations); with mutex_ held.
  template <typename Visit>
  void for_each_stat(Visit visit) {
    for (auto* stat : {&stats_.active_requests, &stats_.active_bytes, &stats_.allocations, &stats_.allocated_bytes}) {
      visit(*stat);
    }
    visit(stats_.host_alloc_time);
    visit(stats_.host_free_time);
  }

  void* take_cached(size_t nbytes) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = cached_.find(nbytes);
    if (it == cached_.end() || it->second.empty()) {
      return nullptr;
    }
    void* pointer = it->second.back();
    it->second.pop_back();
    return pointer;
  }


  const c10::DeviceType type_;
  std::mutex mutex_;
  std::unordered_map<size_t, std::vector<void*>> cached_;
  std::unordered_map<void*, size_t> sizes_;
  at::HostStats stats_;
};

std::array<std::unique_ptr<PinnedHostAllocator>,
           static_cast<size_t>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES)>
    host_allocators;

// A DataPtr deleter: it runs inside destructors, so nothing may escape it.
void release(void* pointer) noexcept {
  try {
    for (auto& allocator : host_allocators) {
      if (allocator && allocator->take_back(pointer)) {
        return;
      }
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch): the block stays out of the cache, still allocated
  }
}

}  // namespace

at::HostAllocator& register_host_allocator(c10::DeviceType type) {
  auto& slot = host_allocators[static_cast<size_t>(type)];
  if (!slot) {
    slot = std::make_unique<PinnedHostAllocator>(type);
    at::setHostAllocator(type, slot.get());
  }
  return *slot;
}

bool is_pinned_host_pointer(const void* pointer) {
  for (int type = 0; type < static_cast<int>(c10::DeviceType::COMPILE_TIME_MAX_DEVICE_TYPES); ++type) {
    driver::DeviceRuntime* runtime = find_device_runtime(static_cast<c10::DeviceType>(type));
    if (runtime != nullptr && runtime->is_host_pinned(pointer)) {
      return true;
    }
  }
  return false;
}

}  // namespace torchplug
