#include "bindings/compiled_kernels.h"

#include <Python.h>

#include <cstdint>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "backend/backend.h"
#include "memory/device_allocator.h"
#include "memory/host_alias.h"
#include "launch/kernel_launch.h"
#include "driver/memory_access.h"

namespace torchplug {
namespace {

// Generated wrappers call these once per kernel and per buffer, so they take
// positional arguments through the vectorcall protocol: a pybind11 signature
// or a Python context manager costs more than a small kernel runs.

c10::Device device_argument(PyObject* type, PyObject* index) {
  const long type_id = PyLong_AsLong(type);
  const long device_index = PyLong_AsLong(index);
  if (PyErr_Occurred() != nullptr) {
    throw python_error();
  }
  const auto device_type = static_cast<c10::DeviceType>(type_id);
  return {device_type, checked_device_index(device_type, static_cast<c10::DeviceIndex>(device_index))};
}

std::vector<int64_t> int_tuple(PyObject* tuple, const char* what) {
  TORCH_CHECK(PyTuple_Check(tuple), "empty_strided_device: ", what, " must be a tuple of ints");
  const Py_ssize_t length = PyTuple_GET_SIZE(tuple);
  std::vector<int64_t> values(static_cast<size_t>(length));
  for (Py_ssize_t i = 0; i < length; ++i) {
    values[static_cast<size_t>(i)] = PyLong_AsLongLong(PyTuple_GET_ITEM(tuple, i));
  }
  if (PyErr_Occurred() != nullptr) {
    throw python_error();
  }
  return values;
}

// Strict memory mode grants a kernel the device storages among its arguments.
std::vector<const void*> touched_storages(PyObject* const* args, Py_ssize_t count) {
  std::vector<const void*> memory;
  for (Py_ssize_t i = 0; i < count; ++i) {
    if (THPVariable_Check(args[i])) {
      const at::Tensor& tensor = THPVariable_Unpack(args[i]);
      if (tensor.defined() && !tensor.device().is_cpu() && tensor.has_storage()) {
        memory.push_back(tensor.storage().data());
      }
    }
  }
  return memory;
}

// launch_compiled(name, kernel, device_type, device_index, *args): runs
// `kernel(*args)` as one launch of a device kernel, like an eager kernel.
PyObject* launch_compiled(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs >= 4, "launch_compiled(name, kernel, device_type, device_index, *args) got ", nargs,
              " arguments");
  const char* name = PyUnicode_AsUTF8(args[0]);
  if (name == nullptr) {
    return nullptr;
  }
  const c10::Device device = device_argument(args[2], args[3]);
  PyObject* const* kernel_args = args + 4;
  const Py_ssize_t kernel_nargs = nargs - 4;
  const std::vector<const void*> memory =
      driver::strict_memory() ? touched_storages(kernel_args, kernel_nargs) : std::vector<const void*>{};
  KernelLaunch launch(name, device, memory);
  return PyObject_Vectorcall(args[1], kernel_args, static_cast<size_t>(kernel_nargs), nullptr);
  END_HANDLE_TH_ERRORS
}

// empty_strided_device(size, stride, dtype, device_type, device_index): a
// buffer from the device's caching allocator, without a trip through the
// dispatcher (Inductor's empty_strided_cuda is the CUDA counterpart).
PyObject* empty_strided_device(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  TORCH_CHECK(nargs == 5, "empty_strided_device(size, stride, dtype, device_type, device_index) got ", nargs,
              " arguments");
  const std::vector<int64_t> size = int_tuple(args[0], "size");
  const std::vector<int64_t> stride = int_tuple(args[1], "stride");
  TORCH_CHECK(THPDtype_Check(args[2]), "empty_strided_device: dtype must be a torch.dtype");
  const c10::ScalarType dtype = reinterpret_cast<THPDtype*>(args[2])->scalar_type;
  const c10::Device device = device_argument(args[3], args[4]);
  c10::DeviceGuard guard(device);
  return THPVariable_Wrap(at::detail::empty_strided_generic(size, stride, &device_allocator(device.type()),
                                                            device_key_set(device.type()), dtype));
  END_HANDLE_TH_ERRORS
}

PyMethodDef compiled_kernel_methods[] = {
    {"launch_compiled", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch_compiled)),
     METH_FASTCALL,
     "launch_compiled(name, kernel, device_type, device_index, *args): run a generated kernel as a device "
     "kernel launch."},
    {"empty_strided_device", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(empty_strided_device)),
     METH_FASTCALL,
     "empty_strided_device(size, stride, dtype, device_type, device_index): a buffer for generated code."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void bind_compiled_kernels(pybind11::module_& module) {
  if (PyModule_AddFunctions(module.ptr(), compiled_kernel_methods) != 0) {
    throw pybind11::error_already_set();
  }
}

}  // namespace torchplug
