#include "runtime/memory_guard.h"

#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "runtime/errors.h"

namespace torchplug::runtime {
namespace {

struct Mapping {
  size_t bytes;
  int open_count;  // kernels currently holding access
};

std::atomic<bool> strict_enabled{false};
std::mutex mappings_mutex;
std::map<char*, Mapping>& mappings() {
  static auto* table = new std::map<char*, Mapping>();  // outlives static destructors
  return *table;
}

size_t page_round(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void set_protection(char* base, size_t bytes, int protection) {
  if (mprotect(base, bytes, protection) != 0) {
    throw RuntimeError(std::string("mprotect failed on simulated device memory: ") + std::strerror(errno));
  }
}

}  // namespace

bool strict_mode() { return strict_enabled.load(std::memory_order_relaxed); }
void set_strict_mode(bool enabled) { strict_enabled.store(enabled); }

void* map_protected(size_t bytes) {
  const size_t length = page_round(bytes == 0 ? 1 : bytes);
  void* base = mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mappings_mutex);
  mappings().emplace(static_cast<char*>(base), Mapping{length, 0});
  return base;
}

bool unmap_protected(void* base) {
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(mappings_mutex);
    auto it = mappings().find(static_cast<char*>(base));
    if (it == mappings().end()) {
      return false;
    }
    length = it->second.bytes;
    mappings().erase(it);
  }
  munmap(base, length);
  return true;
}

KernelAccess::KernelAccess(std::initializer_list<const void*> pointers) {
  if (strict_mode()) {
    for (const void* pointer : pointers) {
      open(pointer);
    }
  }
}

KernelAccess::KernelAccess(const std::vector<const void*>& pointers) {
  if (strict_mode()) {
    for (const void* pointer : pointers) {
      open(pointer);
    }
  }
}

void KernelAccess::open(const void* pointer) {
  if (pointer == nullptr) {
    return;
  }
  std::lock_guard<std::mutex> lock(mappings_mutex);
  auto& table = mappings();
  auto it = table.upper_bound(static_cast<char*>(const_cast<void*>(pointer)));
  if (it == table.begin()) {
    return;
  }
  --it;
  char* base = it->first;
  if (static_cast<const char*>(pointer) >= base + it->second.bytes) {
    return;
  }
  if (it->second.open_count++ == 0) {
    set_protection(base, it->second.bytes, PROT_READ | PROT_WRITE);
  }
  opened_.push_back(base);
}

KernelAccess::~KernelAccess() {
  if (opened_.empty()) {
    return;
  }
  std::lock_guard<std::mutex> lock(mappings_mutex);
  auto& table = mappings();
  for (void* base : opened_) {
    auto it = table.find(static_cast<char*>(base));
    if (it != table.end() && --it->second.open_count == 0) {
      mprotect(base, it->second.bytes, PROT_NONE);
    }
  }
}

}  // namespace torchplug::runtime
