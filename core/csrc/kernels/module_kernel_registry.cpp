// The operators the core's device kernels (device_kernels/) serve, registered
// together for a device whose driver runs them: each file of kernels/ named
// below covers one family and sends the calls it does not cover to the
// copying fallback.
#include "registration/device_kernels.h"

namespace torchplug {

void register_module_kernels(DeviceKernels& library);             // module_kernels.cpp
void register_copy_module_kernels(DeviceKernels& library);        // device_copy.cpp
void register_dropout_module_kernels(DeviceKernels& library);     // dropout_kernels.cpp
void register_fill_module_kernels(DeviceKernels& library);        // fill_kernels.cpp
void register_foreach_module_kernels(DeviceKernels& library);     // foreach_kernels.cpp
void register_normalization_module_kernels(DeviceKernels& library);  // normalization_kernels.cpp
void register_embedding_module_kernels(DeviceKernels& library);   // embedding_kernels.cpp
void register_index_module_kernels(DeviceKernels& library);       // index_kernels.cpp
void register_mask_module_kernels(DeviceKernels& library);        // mask_kernels.cpp

void register_device_module_kernels(DeviceKernels& library) {
  register_module_kernels(library);
  register_copy_module_kernels(library);
  register_dropout_module_kernels(library);
  register_fill_module_kernels(library);
  register_foreach_module_kernels(library);
  register_normalization_module_kernels(library);
  register_embedding_module_kernels(library);
  register_index_module_kernels(library);
  register_mask_module_kernels(library);
}

}  // namespace torchplug
