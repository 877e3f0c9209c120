#include "kernels/fallback_report.h"

#include <atomic>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/operator_name.h>

#include "launch/worker_thread.h"

namespace torchplug {
namespace {

struct Counters {
  explicit Counters(c10::OperatorName name) : name(std::move(name)), label(toString(this->name)) {}

  const c10::OperatorName name;
  const std::string label;
  std::atomic<uint64_t> calls{0};
  std::atomic<uint64_t> bytes{0};
  std::atomic<int64_t> nanoseconds{0};
  std::atomic<bool> noticed{false};
};

// Every operator's counters, kept for the life of the process (a reset zeroes
// them), so the threads' caches may point at them. Leaked on purpose: stream
// workers may run the fallback while the process exits.
std::mutex counters_mutex;
auto* all_counters = new std::map<std::pair<c10::DeviceType, std::string>, std::unique_ptr<Counters>>();
std::atomic<FallbackNotice> notice_hook{nullptr};

// A thread's cache key: the dispatcher's entry of the operator (its name lives
// there, at one address while the operator is registered) and the device type.
struct CacheKey {
  const c10::OperatorName* op;
  c10::DeviceType type;
  bool operator==(const CacheKey& other) const { return op == other.op && type == other.type; }
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& key) const {
    return std::hash<const void*>()(key.op) ^ static_cast<size_t>(key.type);
  }
};

Counters& shared_counters(const c10::OperatorName& name, c10::DeviceType type) {
  std::lock_guard<std::mutex> lock(counters_mutex);
  auto& slot = (*all_counters)[{type, toString(name)}];
  if (slot == nullptr) {
    slot = std::make_unique<Counters>(name);
  }
  return *slot;
}

Counters& counters_of(const c10::OperatorHandle& op, c10::DeviceType type) {
  thread_local std::unordered_map<CacheKey, Counters*, CacheKeyHash> cache;
  const c10::OperatorName& name = op.operator_name();
  Counters*& cached = cache[{&name, type}];
  // An operator registered again (torch.library) may take a dropped one's
  // address: the name tells them apart.
  if (cached == nullptr || cached->name != name) {
    cached = &shared_counters(name, type);
  }
  return *cached;
}

}  // namespace

void count_fallback(const c10::OperatorHandle& op, c10::Device device, uint64_t bytes,
                    std::chrono::steady_clock::duration elapsed) {
  Counters& counters = counters_of(op, device.type());
  counters.calls.fetch_add(1, std::memory_order_relaxed);
  counters.bytes.fetch_add(bytes, std::memory_order_relaxed);
  counters.nanoseconds.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count(),
                                 std::memory_order_relaxed);
  const FallbackNotice notice = notice_hook.load(std::memory_order_acquire);
  if (notice != nullptr && !counters.noticed.load(std::memory_order_relaxed) && !on_stream_worker_thread() &&
      !counters.noticed.exchange(true)) {
    notice(counters.label, device);
  }
}

std::vector<FallbackCount> fallback_counts(c10::DeviceType type) {
  std::vector<FallbackCount> result;
  std::lock_guard<std::mutex> lock(counters_mutex);
  for (const auto& [key, counters] : *all_counters) {
    const uint64_t calls = counters->calls.load(std::memory_order_relaxed);
    if (key.first == type && calls > 0) {
      result.push_back({counters->label, calls, counters->bytes.load(std::memory_order_relaxed),
                        counters->nanoseconds.load(std::memory_order_relaxed)});
    }
  }
  return result;
}

void reset_fallback_counts(c10::DeviceType type) {
  std::lock_guard<std::mutex> lock(counters_mutex);
  for (const auto& [key, counters] : *all_counters) {
    if (key.first == type) {
      counters->calls.store(0, std::memory_order_relaxed);
      counters->bytes.store(0, std::memory_order_relaxed);
      counters->nanoseconds.store(0, std::memory_order_relaxed);
    }
  }
}

void set_fallback_notice(FallbackNotice notice) { notice_hook.store(notice, std::memory_order_release); }

}  // namespace torchplug
