#pragma once
// Error types of the simulated runtime. The torch layer turns them into the
// matching torch exceptions (OutOfMemoryError, RuntimeError).
#include <cstddef>
#include <stdexcept>
#include <string>

namespace torchplug::runtime {

class RuntimeError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class OutOfMemoryError : public RuntimeError {
 public:
  OutOfMemoryError(const std::string& message, int device, size_t requested, size_t free,
                   size_t capacity, bool injected = false)
      : RuntimeError(message),
        device(device),
        requested(requested),
        free(free),
        capacity(capacity),
        injected(injected) {}
  int device;
  size_t requested;
  size_t free;
  size_t capacity;
  bool injected;  // made to fail by fault injection, not by a full device
};

}  // namespace torchplug::runtime
