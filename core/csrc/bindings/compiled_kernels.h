#pragma once
// Kernels that torch.compile generates enter the device through the same
// KernelLaunch as eager kernels; this binds that launch for their wrappers. On
// a device whose memory the host cannot address, they are loaded into the
// device instead (load_device_function) and launched there (launch_device_code).
#include <pybind11/pybind11.h>

namespace torchplug {

void bind_compiled_kernels(pybind11::module_& module);

}  // namespace torchplug
