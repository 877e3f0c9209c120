// torchplug._distributed: the collective backend's Python face. A module of
// its own, loaded only when a process group first asks for the backend, so
// `import torch` never pays for the c10d headers' code or its registrations.
#include <string>
#include <utility>
#include <vector>

#include <torch/csrc/utils/pybind.h>

#include "distributed/device_collectives.h"
#include "torchplug/kernel_scope.h"

namespace py = pybind11;

namespace torchplug::distributed {

// The Python object's holder. pybind11 destroys holders with the GIL held, and
// the last DeviceCollectives reference takes its Gloo transport with it, whose
// destructor joins Gloo's worker threads. A worker still releasing a finished
// collective needs the GIL (the work's saved thread-local state holds Python
// objects), so destroying with the GIL held deadlocks destroy_process_group().
// Same layout as c10::intrusive_ptr, as torch's own Backend holders, so c10d's
// bindings that take intrusive_ptr<Backend> accept the object.
template <typename T>
class ReleasesGilOnDestruction {
 public:
  ReleasesGilOnDestruction() = default;
  explicit ReleasesGilOnDestruction(T* fresh) : object_(c10::intrusive_ptr<T>::unsafe_steal_from_new(fresh)) {}
  explicit ReleasesGilOnDestruction(c10::intrusive_ptr<T> object) : object_(std::move(object)) {}
  ReleasesGilOnDestruction(const ReleasesGilOnDestruction&) = default;
  ReleasesGilOnDestruction& operator=(const ReleasesGilOnDestruction&) = default;
  ~ReleasesGilOnDestruction() {
    if (object_ && PyGILState_Check()) {
      py::gil_scoped_release released;
      object_.reset();
    }
  }

  T* get() const { return object_.get(); }

 private:
  c10::intrusive_ptr<T> object_;
};

}  // namespace torchplug::distributed

PYBIND11_DECLARE_HOLDER_TYPE(T, torchplug::distributed::ReleasesGilOnDestruction<T>, true)

PYBIND11_MODULE(_distributed, m) {
  using torchplug::distributed::DeviceCollectives;
  using Holder = torchplug::distributed::ReleasesGilOnDestruction<DeviceCollectives>;
  m.doc() = "torchplug collective backend (c10d over Gloo; zero-copy on host-addressable devices).";
  m.attr("BACKEND_NAME") = torchplug::distributed::kBackendName;

  // Collectives enter the device through the core's kernel launch (kernel_scope.h).
  if (!torchplug::load_kernel_api()) {
    throw py::error_already_set();
  }
  // Derives from torch's own binding of c10d::Backend (registered when
  // torch.distributed is imported), so process groups accept it like any backend.
  py::module_::import("torch.distributed");
  py::class_<DeviceCollectives, c10d::Backend, Holder>(m, "DeviceCollectives")
      .def(py::init([](c10::intrusive_ptr<c10d::Backend> transport, c10::intrusive_ptr<c10d::Backend> checks,
                       int rank, int size, const std::vector<std::string>& staged) {
             // Device names ("npu"): the types they parse to once their backend registered.
             std::vector<c10::DeviceType> staged_types;
             for (const std::string& name : staged) {
               staged_types.push_back(c10::Device(name).type());
             }
             return Holder(c10::make_intrusive<DeviceCollectives>(std::move(transport), std::move(checks), rank,
                                                                  size, staged_types));
           }),
           py::arg("transport"), py::arg("checks"), py::arg("rank"), py::arg("size"),
           py::arg("staged") = std::vector<std::string>{})
      .def_property_readonly("transport", &DeviceCollectives::transport);
}
