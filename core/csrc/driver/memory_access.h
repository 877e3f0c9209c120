#pragma once
// Strict memory (a simulator control): device memory is kept inaccessible to
// the host except inside an access window a kernel or copy opens for the
// allocations it was given. The core keeps the setting (one atomic load per
// question) and opens windows through a simulator driver only while it is on.
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace torchplug::driver {

class DeviceRuntime;

bool strict_memory();
// Sets strict memory through every simulator runtime opened (and those opened later).
void set_strict_memory(bool enabled);
// Called when a runtime opens: applies the setting to it, and makes the first
// simulator runtime the one that opens access windows.
void strict_memory_runtime_opened(DeviceRuntime& runtime);

// Grants the host access to the protected allocations holding `pointers`
// while it lives; nothing outside strict memory.
class MemoryAccess {
 public:
  MemoryAccess(std::initializer_list<const void*> pointers);
  explicit MemoryAccess(const std::vector<const void*>& pointers);
  ~MemoryAccess();
  MemoryAccess(const MemoryAccess&) = delete;
  MemoryAccess& operator=(const MemoryAccess&) = delete;

 private:
  void open(const void* const* pointers, size_t count);
  void* window_ = nullptr;
};

}  // namespace torchplug::driver
