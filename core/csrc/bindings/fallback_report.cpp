#include "bindings/fallback_report.h"

#include <Python.h>

#include <string>

#include <c10/core/Device.h>

#include "backend/backend.h"
#include "kernels/fallback_report.h"

namespace py = pybind11;

namespace torchplug {
namespace {

// The Python function told of first fallback calls. Leaked on purpose, as
// the core's other process-long state: a fallback call may come while the
// interpreter exits, after static destructors could have dropped it.
auto* notice_function = new py::object();

// Python 3.13 made Py_IsFinalizing public and removed _Py_IsFinalizing.
bool python_finalizing() {
#if PY_VERSION_HEX >= 0x030D0000
  return Py_IsFinalizing() != 0;
#else
  return _Py_IsFinalizing() != 0;
#endif
}

void notify_python(const std::string& op, c10::Device device) {
  if (Py_IsInitialized() == 0 || python_finalizing()) {
    return;
  }
  const py::gil_scoped_acquire gil;
  if (!*notice_function) {
    return;  // switched off since the core read the hook
  }
  try {
    (*notice_function)(op, device.str());
  } catch (py::error_already_set& error) {
    // A notice must not fail the operator it is about.
    error.discard_as_unraisable("torchplug's fallback notice");
  }
}

}  // namespace

void bind_fallback_report(py::module_& module) {
  module.def("fallback_report", [](const std::string& device_type) {
    py::list result;
    for (const FallbackCount& count : fallback_counts(backend(device_type).type)) {
      result.append(py::make_tuple(count.op, count.calls, count.bytes, count.nanoseconds));
    }
    return result;
  });
  module.def("reset_fallback_report",
             [](const std::string& device_type) { reset_fallback_counts(backend(device_type).type); });
  // `function(op, device)`, or None to stop the notices.
  module.def("set_fallback_notice", [](const py::object& function) {
    const bool on = !function.is_none();
    *notice_function = on ? function : py::object();
    set_fallback_notice(on ? &notify_python : nullptr);
  });
}

}  // namespace torchplug
