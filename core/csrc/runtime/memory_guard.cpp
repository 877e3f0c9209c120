#include "runtime/memory_guard.h"

#include <signal.h>
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

struct sigaction previous_segv_action;

bool is_device_address(const void* address) {
  // Runs in a signal handler on a dying thread: read without the lock.
  const auto& table = mappings();
  auto it = table.upper_bound(static_cast<char*>(const_cast<void*>(address)));
  if (it == table.begin()) {
    return false;
  }
  --it;
  return static_cast<const char*>(address) < it->first + it->second.bytes;
}

void on_segv(int signal, siginfo_t* info, void* context) {
  if (is_device_address(info->si_addr)) {
    static const char message[] =
        "\ntorchplug strict mode: host code read or wrote simulated device memory outside a kernel "
        "or copy. Device tensors are not host-accessible: copy them first (tensor.cpu()), or run "
        "without TORCHPLUG_STRICT_MEMORY=1. Aborting.\n";
    (void)!write(STDERR_FILENO, message, sizeof(message) - 1);
  }
  // Hand the fault on (Python's faulthandler, or the default: terminate).
  sigaction(SIGSEGV, &previous_segv_action, nullptr);
  if (previous_segv_action.sa_flags & SA_SIGINFO) {
    previous_segv_action.sa_sigaction(signal, info, context);
  } else if (previous_segv_action.sa_handler != SIG_DFL && previous_segv_action.sa_handler != SIG_IGN) {
    previous_segv_action.sa_handler(signal);
  }
}

void install_segv_reporter() {
  static const bool installed = [] {
    struct sigaction action {};
    action.sa_sigaction = &on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    return sigaction(SIGSEGV, &action, &previous_segv_action) == 0;
  }();
  (void)installed;
}

}  // namespace

bool strict_mode() { return strict_enabled.load(std::memory_order_relaxed); }
void set_strict_mode(bool enabled) {
  if (enabled) {
    install_segv_reporter();
  }
  // Memory mapped while strict mode was on outlives it in allocators' caches,
  // which hand it to host code (a pageable copy) once strict mode is off:
  // it is ordinary memory while strict mode is off, protected again when it
  // returns. A window open now keeps its access until it closes.
  std::lock_guard<std::mutex> lock(mappings_mutex);
  strict_enabled.store(enabled);
  for (auto& [base, mapping] : mappings()) {
    if (mapping.open_count == 0) {
      set_protection(base, mapping.bytes, enabled ? PROT_NONE : PROT_READ | PROT_WRITE);
    }
  }
}

void* map_protected(size_t bytes, int fd) {
  const size_t length = page_round(bytes == 0 ? 1 : bytes);
  void* base = fd < 0 ? mmap(nullptr, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                      : mmap(nullptr, length, PROT_NONE, MAP_SHARED, fd, 0);
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

KernelAccess::KernelAccess(const void* const* pointers, size_t count) {
  if (strict_mode()) {
    for (size_t i = 0; i < count; ++i) {
      open(pointers[i]);
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
    if (it != table.end() && --it->second.open_count == 0 && strict_mode()) {
      mprotect(base, it->second.bytes, PROT_NONE);
    }
  }
}

}  // namespace torchplug::runtime
