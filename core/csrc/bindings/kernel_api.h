#pragma once
// Publishes torchplug/kernel_api.h's table to plugins as a Python capsule.
#include <pybind11/pybind11.h>

namespace torchplug {

pybind11::capsule kernel_api_capsule();

}  // namespace torchplug
