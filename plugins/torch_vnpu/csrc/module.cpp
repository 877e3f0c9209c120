// torch_vnpu._C: importing it loads this library, whose static
// initializers register the npu operators with the dispatcher.
#include <Python.h>

#include <torchplug/kernel_api_load.h>

PyMODINIT_FUNC PyInit__C() {
  static PyModuleDef definition = {
      PyModuleDef_HEAD_INIT, "torch_vnpu._C",
      "The npu vendor operators (torch.ops.npu.*), registered when this module is imported.", -1,
      nullptr};
  if (!torchplug::load_kernel_api()) {
    return nullptr;
  }
  return PyModule_Create(&definition);
}
