#pragma once
// Strict mode: device memory is kept inaccessible (PROT_NONE pages) except
// while a kernel or a copy that was given it is running, so host code that
// reads a device tensor's storage directly faults at the offending access.
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace torchplug::runtime {

bool strict_mode();
void set_strict_mode(bool enabled);

// Page-granular device memory for strict mode: mapped inaccessible; private
// pages, or the shared pages of the memory file `fd` (shareable memory).
void* map_protected(size_t bytes, int fd = -1);
// Returns false when `base` was not mapped by map_protected.
bool unmap_protected(void* base);

// Grants access to the protected allocations containing the given pointers
// for the lifetime of the object; a no-op for unprotected memory.
class KernelAccess {
 public:
  KernelAccess(std::initializer_list<const void*> pointers) : KernelAccess(pointers.begin(), pointers.size()) {}
  // The pointers of an access window a driver client opens (TPD_Simulator_Access_Args).
  KernelAccess(const void* const* pointers, size_t count);
  ~KernelAccess();
  KernelAccess(const KernelAccess&) = delete;
  KernelAccess& operator=(const KernelAccess&) = delete;

 private:
  void open(const void* pointer);
  std::vector<void*> opened_;
};

}  // namespace torchplug::runtime
