#pragma once
// The C interface torchplug's native core offers to the native code of
// backend plugins, published as the capsule `torchplug._C._kernel_api`.
// Plain function pointers in a versioned table, so a plugin neither links the
// core nor depends on its C++ ABI. C++ kernels use kernel_scope.h instead
// (stable/kernel_scope.h for kernels built against torch's stable ABI).
#include <stddef.h>
#include <stdint.h>

#define TORCHPLUG_KERNEL_API_CAPSULE "torchplug._C._kernel_api"
#define TORCHPLUG_KERNEL_API_VERSION 3

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

  // Version 3: what kernels built against torch's stable ABI cannot do
  // through it. Tensors are passed as that ABI's AtenTensorHandle; each
  // returns 0, or -1 with a NUL-terminated message in `error`.

  // Fails as the CPU's kernels do when an output overlaps itself or shares
  // part of its memory with an input or another output (exactly an input,
  // in place, is allowed); a NULL input (an absent optional) is skipped.
  int (*check_no_overlap)(void* const* inputs, size_t input_count, void* const* outputs, size_t output_count,
                          char* error, size_t error_size);

  // Resizes an out= argument to `sizes` (`dims` of them) as torch's out=
  // kernels do: with torch's warning when a non-empty tensor changes shape.
  int (*resize_output)(void* out, const int64_t* sizes, size_t dims, char* error, size_t error_size);

  // Writes the name torch prints for device (`device_type`, `device_index`),
  // such as "npu:0" (a renamed PrivateUse1) or "cpu", into `name`.
  int (*device_name)(int device_type, int device_index, char* name, size_t name_size, char* error,
                     size_t error_size);
} TorchplugKernelApi;

#ifdef __cplusplus
}
#endif
