// torchplug._distributed: the collective backend's Python face. A module of
// its own, loaded only when a process group first asks for the backend, so
// `import torch` never pays for the c10d headers' code or its registrations.
#include <torch/csrc/utils/pybind.h>

#include "distributed/device_collectives.h"

namespace py = pybind11;

PYBIND11_MODULE(_distributed, m) {
  using torchplug::distributed::DeviceCollectives;
  m.doc() = "torchplug collective backend for simulated devices (c10d over Gloo, zero-copy).";
  m.attr("BACKEND_NAME") = torchplug::distributed::kBackendName;

  // Derives from torch's own binding of c10d::Backend (registered when
  // torch.distributed is imported), so process groups accept it like any backend.
  py::module_::import("torch.distributed");
  py::class_<DeviceCollectives, c10d::Backend, c10::intrusive_ptr<DeviceCollectives>>(m, "DeviceCollectives")
      .def(py::init<c10::intrusive_ptr<c10d::Backend>, int, int>(), py::arg("transport"), py::arg("rank"),
           py::arg("size"))
      .def_property_readonly("transport", &DeviceCollectives::transport);
}
