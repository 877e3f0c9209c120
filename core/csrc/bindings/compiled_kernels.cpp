#include "bindings/compiled_kernels.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "aten/kernel_launch.h"

namespace py = pybind11;

namespace torchplug {
namespace {

std::vector<const void*> as_pointers(const std::vector<std::uintptr_t>& addresses) {
  std::vector<const void*> pointers;
  pointers.reserve(addresses.size());
  for (const std::uintptr_t address : addresses) {
    pointers.push_back(reinterpret_cast<const void*>(address));
  }
  return pointers;
}

// A context manager: `with CompiledKernelLaunch(...): kernel(*args)`.
class CompiledKernelLaunch {
 public:
  CompiledKernelLaunch(std::string name, int device_type, int device_index, std::vector<std::uintptr_t> memory)
      : name_(std::move(name)),
        device_(static_cast<c10::DeviceType>(device_type), static_cast<c10::DeviceIndex>(device_index)),
        memory_(as_pointers(memory)) {}

  void enter() {
    TORCH_CHECK(!launch_.has_value(), "a compiled kernel launch cannot be entered twice");
    launch_.emplace(name_.c_str(), device_, memory_);
  }

  void exit() { launch_.reset(); }

 private:
  std::string name_;
  c10::Device device_;
  std::vector<const void*> memory_;
  std::optional<KernelLaunch> launch_;
};

}  // namespace

void bind_compiled_kernels(py::module_& module) {
  py::class_<CompiledKernelLaunch>(module, "CompiledKernelLaunch")
      .def(py::init<std::string, int, int, std::vector<std::uintptr_t>>(), py::arg("name"), py::arg("device_type"),
           py::arg("device_index"), py::arg("memory"))
      .def("__enter__", &CompiledKernelLaunch::enter)
      .def("__exit__", [](CompiledKernelLaunch& self, const py::args&) {
        self.exit();
        return false;
      });
}

}  // namespace torchplug
