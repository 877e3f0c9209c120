#pragma once
// Fetching the core's kernel API table (kernel_api.h) from a plugin's
// extension module; shared by kernel_scope.h and stable/kernel_scope.h, and
// free of torch headers.
#include <Python.h>

#include "torchplug/kernel_api.h"

namespace torchplug {
namespace detail {

inline const TorchplugKernelApi*& loaded_kernel_api() {
  static const TorchplugKernelApi* api = nullptr;
  return api;
}

}  // namespace detail

// Fetches the core's table. Call it with the GIL held, from the plugin's
// module initialisation. Returns false with a Python exception set when
// torchplug's native core cannot be imported or is older than these headers.
inline bool load_kernel_api() {
  auto* api = static_cast<const TorchplugKernelApi*>(PyCapsule_Import(TORCHPLUG_KERNEL_API_CAPSULE, 0));
  if (api == nullptr) {
    return false;
  }
  if (api->version < TORCHPLUG_KERNEL_API_VERSION) {
    PyErr_Format(PyExc_ImportError,
                 "torchplug's native core offers kernel API version %u, but this plugin was built against "
                 "version %d: upgrade torchplug.",
                 api->version, TORCHPLUG_KERNEL_API_VERSION);
    return false;
  }
  detail::loaded_kernel_api() = api;
  return true;
}

}  // namespace torchplug
