#include "bindings/compiled_kernels.h"

#include <Python.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/csrc/Dtype.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include "backend/backend.h"
#include "driver/kernel_module.h"
#include "launch/device_function.h"
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

// What every launch fast path takes first: (name, kernel, device_type,
// device_index), `signature` naming them in the error of a short call.
struct LaunchTarget {
  const char* name;
  c10::Device device;
};

LaunchTarget launch_target(PyObject* const* args, Py_ssize_t nargs, const char* signature) {
  TORCH_CHECK(nargs >= 4, signature, " got ", nargs, " arguments");
  const char* name = PyUnicode_AsUTF8(args[0]);
  if (name == nullptr) {
    throw python_error();
  }
  return {name, device_argument(args[2], args[3])};
}

// One argument of a generated kernel as the device takes it: a tensor of the
// launch's device as its address there (offset included), None as a null
// pointer, an int as int64, a float as float64.
TPD_KernelArg kernel_arg(PyObject* value, c10::Device device, const char* name, Py_ssize_t position) {
  TPD_KernelArg arg{};
  if (value == Py_None) {
    arg.kind = TPD_KERNEL_ARG_POINTER;
    arg.value.pointer = nullptr;
  } else if (THPVariable_Check(value)) {
    const at::Tensor& tensor = THPVariable_Unpack(value);
    TORCH_CHECK(tensor.defined() && tensor.device() == device, "compiled kernel ", name, ": argument ", position,
                " is a tensor on ", tensor.defined() ? tensor.device().str() : std::string("no device"),
                ", but the kernel runs on ", device.str(), "; its tensors must be on that device.");
    arg.kind = TPD_KERNEL_ARG_POINTER;
    arg.value.pointer = const_cast<void*>(tensor.const_data_ptr());
  } else if (PyLong_Check(value)) {
    arg.kind = TPD_KERNEL_ARG_INT64;
    arg.value.int64 = PyLong_AsLongLong(value);
    if (PyErr_Occurred() != nullptr) {
      throw python_error();
    }
  } else if (PyFloat_Check(value)) {
    arg.kind = TPD_KERNEL_ARG_FLOAT64;
    arg.value.float64 = PyFloat_AS_DOUBLE(value);
  } else {
    TORCH_CHECK_TYPE(false, "compiled kernel ", name, ": argument ", position, " is a ", Py_TYPE(value)->tp_name,
                     "; a device kernel takes tensors, None, ints and floats.");
  }
  return arg;
}

// A kernel name that outlives the generated module naming it: a queued
// kernel reports its failure, and the profiler its activity, by name.
const char* interned_name(const char* name) {
  static std::mutex lock;
  static std::unordered_set<std::string> names;
  const std::lock_guard<std::mutex> guard(lock);
  return names.emplace(name).first->c_str();
}

// The image entry point of a generated kernel (torchplug/inductor/device_code.py).
using HostEntryPoint = int (*)(const TPD_KernelArg*, size_t, char*, size_t);

// launch_host_code(name, entry_point, device_type, device_index, *args): the
// generated kernel whose entry point Inductor loaded into this process, over
// device memory the host addresses, launched as an eager kernel is: queued on
// the device's current stream (see queues_kernel), or run at once inside a
// kernel launch (stream order, strict memory access, profiler activity).
PyObject* launch_host_code(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  const auto [python_name, device] =
      launch_target(args, nargs, "launch_host_code(name, entry_point, device_type, device_index, *args)");
  auto* entry_point = reinterpret_cast<HostEntryPoint>(PyLong_AsVoidPtr(args[1]));
  if (PyErr_Occurred() != nullptr) {
    return nullptr;
  }
  TORCH_CHECK(entry_point != nullptr, "compiled kernel ", python_name, " has no entry point.");
  // The entry point reads the operands' memory from the host: only memory the host addresses.
  TORCH_CHECK(backend(device.type()).host_addressable, "compiled kernel ", python_name, " runs on the host, but ",
              device, "'s memory is not host-addressable; its kernels are launched with launch_device_code.");
  const char* name = interned_name(python_name);
  std::vector<TPD_KernelArg> kernel_args;
  kernel_args.reserve(static_cast<size_t>(nargs - 4));
  std::vector<const at::Tensor*> tensors;
  int64_t work = 0;
  for (Py_ssize_t i = 4; i < nargs; ++i) {
    kernel_args.push_back(kernel_arg(args[i], device, name, i - 4));
    if (THPVariable_Check(args[i])) {
      const at::Tensor& tensor = THPVariable_Unpack(args[i]);
      tensors.push_back(&tensor);
      work = std::max(work, tensor.numel());
    }
  }
  auto run = [entry_point, name, kernel_args = std::move(kernel_args)] {
    char message[512] = {};
    TORCH_CHECK(entry_point(kernel_args.data(), kernel_args.size(), message, sizeof message) == 0,
                "compiled kernel ", name, " failed: ", message);
  };
  if (queues_kernel(device, work)) {
    // Its operands are raw pointers: memory the program frees meanwhile stays
    // mapped for the stream's queued work, as with eager kernels' unowned views.
    enqueue_kernel(name, device, std::move(run));
  } else {
    std::vector<const void*> memory;
    if (driver::strict_memory()) {
      for (const at::Tensor* tensor : tensors) {
        if (!tensor->device().is_cpu() && tensor->has_storage()) {
          memory.push_back(tensor->storage().data());
        }
      }
    }
    const KernelLaunch launch(name, device, memory);
    run();
  }
  Py_RETURN_NONE;
  END_HANDLE_TH_ERRORS
}

// launch_device_code(name, function, device_type, device_index, *args): queues
// the loaded function (load_device_function's address) with `args` on the
// device's current stream. Called once per kernel by generated wrappers, so
// it takes its arguments through the vectorcall protocol.
PyObject* launch_device_code(PyObject* /*module*/, PyObject* const* args, Py_ssize_t nargs) {
  HANDLE_TH_ERRORS
  const auto [name, device] =
      launch_target(args, nargs, "launch_device_code(name, function, device_type, device_index, *args)");
  auto* function = static_cast<TPD_Function*>(PyLong_AsVoidPtr(args[1]));
  if (PyErr_Occurred() != nullptr) {
    return nullptr;
  }
  TORCH_CHECK(function != nullptr, "compiled kernel ", name, " was not loaded into the device.");
  std::vector<TPD_KernelArg> kernel_args;
  kernel_args.reserve(static_cast<size_t>(nargs - 4));
  for (Py_ssize_t i = 4; i < nargs; ++i) {
    kernel_args.push_back(kernel_arg(args[i], device, name, i - 4));
  }
  launch_device_function(device, function, kernel_args.data(), kernel_args.size());
  Py_RETURN_NONE;
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
    {"launch_host_code", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch_host_code)),
     METH_FASTCALL,
     "launch_host_code(name, entry_point, device_type, device_index, *args): launch a generated kernel over "
     "host-addressable device memory as an eager kernel (queued on the current stream)."},
    {"empty_strided_device", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(empty_strided_device)),
     METH_FASTCALL,
     "empty_strided_device(size, stride, dtype, device_type, device_index): a buffer for generated code."},
    {"launch_device_code", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(launch_device_code)),
     METH_FASTCALL,
     "launch_device_code(name, function, device_type, device_index, *args): queue a function loaded into the "
     "device (load_device_function) on the device's current stream."},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace

void bind_compiled_kernels(pybind11::module_& module) {
  if (PyModule_AddFunctions(module.ptr(), compiled_kernel_methods) != 0) {
    throw pybind11::error_already_set();
  }
  module.def(
      "kernel_image_format",
      [](const std::string& device) -> std::optional<std::string> {
        const char* format = driver::kernel_image_format(*backend(device).runtime);
        return format == nullptr ? std::nullopt : std::optional<std::string>(format);
      },
      "The format of the code images the driver of `device` loads into its devices; None when it loads none.");
  module.def(
      "load_device_function",
      [](const std::string& device, const pybind11::bytes& image, const std::string& name) {
        const std::string bytes = image;
        driver::DeviceRuntime& runtime = *backend(device).runtime;
        TPD_Function* function = translate_runtime_errors(
            [&] { return driver::load_function(runtime, bytes.data(), bytes.size(), name.c_str()); });
        return reinterpret_cast<uintptr_t>(function);
      },
      "Loads the code image `image` into the devices of `device` and returns the address of its function `name`, "
      "for launch_device_code.");
}

}  // namespace torchplug
