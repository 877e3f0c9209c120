#pragma once
// The fallback report (kernels/fallback_report.h) for Python: the counts of
// a device type, their reset, and the notice of an operator's first fallback
// call handed to a Python function (TORCHPLUG_WARN_FALLBACK logs it).
#include <pybind11/pybind11.h>

namespace torchplug {

void bind_fallback_report(pybind11::module_& module);

}  // namespace torchplug
