#include "memory/worker_scratch.h"

#include <pthread.h>

#include <atomic>
#include <map>
#include <mutex>
#include <unordered_map>

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/alloc_cpu.h>
#include <c10/util/Exception.h>

#include "launch/worker_thread.h"

namespace torchplug {
namespace {

// Smaller buffers come from malloc's bins, which it does not give back.
constexpr size_t kCachedFrom = size_t{1} << 20;
// Free buffers past this are freed at once: a cache, not a leak.
constexpr size_t kCacheLimit = size_t{512} << 20;

class WorkerScratch final : public c10::Allocator {
 public:
  explicit WorkerScratch(c10::Allocator* wrapped) : wrapped_(wrapped) {}

  c10::DataPtr allocate(size_t nbytes) override {
    if (nbytes < kCachedFrom || !on_stream_worker_thread()) {
      return wrapped_->allocate(nbytes);
    }
    void* data = take(nbytes);
    return {data, data, &release, c10::Device(c10::kCPU)};
  }

  // What raw_deallocate calls, for raw_allocate's buffers of either kind (oneDNN's are).
  c10::DeleterFnPtr raw_deleter() const override { return &release; }

  void copy_data(void* dest, const void* src, std::size_t count) const override {
    wrapped_->copy_data(dest, src, count);
  }

  size_t free_bytes() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return free_bytes_;
  }

  void release_free() {
    std::multimap<size_t, void*> freeing;
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      freeing.swap(free_);
      free_bytes_ = 0;
      for (const auto& [size, data] : freeing) {
        sizes_.erase(data);
      }
    }
    for (const auto& [size, data] : freeing) {
      c10::free_cpu(data);
    }
  }

  static void release(void* data);

  // Held across fork(), so a child (a DataLoader worker) gets the cache
  // consistent and unlocked, whatever a stream worker was doing.
  void lock_for_fork() { mutex_.lock(); }
  void unlock_after_fork() { mutex_.unlock(); }

 private:
  // A free buffer of at least `nbytes` and at most a quarter more, else a new one.
  void* take(size_t nbytes) {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      const auto found = free_.lower_bound(nbytes);
      if (found != free_.end() && found->first - nbytes <= nbytes / 4) {
        void* data = found->second;
        free_bytes_ -= found->first;
        free_.erase(found);
        return data;
      }
    }
    void* data = c10::alloc_cpu(nbytes);
    const std::lock_guard<std::mutex> lock(mutex_);
    sizes_.emplace(data, nbytes);
    caches_.store(true, std::memory_order_relaxed);
    return data;
  }

  // Takes `data` back when the cache handed it out: true then.
  bool give_back(void* data) {
    if (!caches_.load(std::memory_order_relaxed)) {
      return false;
    }
    std::unique_lock<std::mutex> lock(mutex_);
    const auto found = sizes_.find(data);
    if (found == sizes_.end()) {
      return false;
    }
    const size_t size = found->second;
    if (free_bytes_ + size > kCacheLimit) {
      sizes_.erase(found);
      lock.unlock();
      c10::free_cpu(data);
      return true;
    }
    free_.emplace(size, data);
    free_bytes_ += size;
    return true;
  }

  c10::Allocator* const wrapped_;
  std::mutex mutex_;
  std::atomic<bool> caches_{false};  // whether the cache ever handed out a buffer
  std::unordered_map<void*, size_t> sizes_;  // every buffer the cache handed out, in use or free
  std::multimap<size_t, void*> free_;        // the free ones, by size
  size_t free_bytes_ = 0;
};

// Leaked on purpose: buffers may be freed after static destructors ran.
WorkerScratch* installed = nullptr;

void WorkerScratch::release(void* data) {
  if (!installed->give_back(data)) {
    const c10::DeleterFnPtr wrapped = installed->wrapped_->raw_deleter();
    TORCH_INTERNAL_ASSERT(wrapped != nullptr, "the CPU allocator torchplug wraps has no raw deleter");
    wrapped(data);
  }
}

}  // namespace

void cache_worker_scratch() {
  static const bool done = [] {
    installed = new WorkerScratch(c10::GetCPUAllocator());
    pthread_atfork([] { installed->lock_for_fork(); }, [] { installed->unlock_after_fork(); },
                   [] { installed->unlock_after_fork(); });
    // The default CPU allocator's priority: one a program set above it stays.
    c10::SetCPUAllocator(installed, /*priority=*/0);
    return true;
  }();
  (void)done;
}

size_t cached_worker_scratch_bytes() { return installed == nullptr ? 0 : installed->free_bytes(); }

void release_worker_scratch() {
  if (installed != nullptr) {
    installed->release_free();
  }
}

}  // namespace torchplug
