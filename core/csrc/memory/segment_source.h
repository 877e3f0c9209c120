#pragma once
// Memory the device allocator takes from a user's library instead of the
// driver: a pluggable allocator (torch.<device>.memory.PluggableAllocator),
// for the whole device type or for one private pool (a MemPool's).
#include <cstddef>
#include <string>

namespace torchplug {

struct SegmentSource {
  // Returns `size` bytes of `device`'s memory for work on `stream` (the
  // driver's TPD_Stream*), or null when it has none.
  using Allocate = void* (*)(size_t size, int device, void* stream);
  // Takes back what Allocate returned, once the work queued on its streams
  // before the free has run.
  using Free = void (*)(void* pointer, size_t size, int device, void* stream);

  std::string name;  // for error messages: the library and its functions
  Allocate allocate;
  Free free;
  // The library allocates through the driver (it was given the driver's API
  // and client by its init function): its memory is the device's own, so a
  // device the host cannot address takes it too.
  bool driver_memory = false;
};

}  // namespace torchplug
