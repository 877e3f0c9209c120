#pragma once
// The C interface torchplug's native core offers to the native code of
// backend plugins, published as the capsule `torchplug._C._kernel_api`.
// Plain function pointers in a versioned table, so a plugin neither links the
// core nor depends on its C++ ABI. C++ kernels use kernel_scope.h instead.
#include <stddef.h>

#define TORCHPLUG_KERNEL_API_CAPSULE "torchplug._C._kernel_api"
#define TORCHPLUG_KERNEL_API_VERSION 2

#ifdef __cplusplus
extern "C" {
#endif

typedef struct TorchplugKernelApi {
  // The TORCHPLUG_KERNEL_API_VERSION the core was built with. Later versions
  // only append members, so a table at least as new as a plugin's headers
  // serves it.
  unsigned int version;

  // Strict memory mode keeps device memory inaccessible to host code. This
  // makes the device allocations holding `pointers` accessible until
  // close_access(*scope); outside strict mode it sets *scope to NULL and does
  // nothing. Returns 0, or -1 with a NUL-terminated message in `error`.
  int (*open_access)(const void* const* pointers, size_t count, void** scope, char* error, size_t error_size);

  // Ends an access opened by open_access; NULL is allowed.
  void (*close_access)(void* scope);

  // Version 2. Opens the core's kernel launch for a kernel named `name` on
  // device (`device_type`, `device_index`): the device is made current, the
  // work queued on its current stream is ordered before the kernel, the
  // allocations holding `pointers` are accessible in strict memory mode, and
  // the kernel is timed for torch.profiler, until close_launch(*scope).
  // Returns 0, or -1 with a NUL-terminated message in `error`.
  int (*open_launch)(const char* name, int device_type, int device_index, const void* const* pointers,
                     size_t count, void** scope, char* error, size_t error_size);

  // Ends a launch opened by open_launch.
  void (*close_launch)(void* scope);
} TorchplugKernelApi;

#ifdef __cplusplus
}
#endif
