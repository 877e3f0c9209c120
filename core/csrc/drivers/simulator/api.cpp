// The simulator's function table and its entry point, TPD_GetApi: the one
// symbol the library exports.
#include <cstddef>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "torchplug/driver.h"

#ifndef TORCHPLUG_SIMULATOR_VERSION
#error "TORCHPLUG_SIMULATOR_VERSION (the driver's release) must be defined by the build"
#endif

namespace torchplug::simulator {

TPD_DRIVER_DEFINE_EXTENSION(controls, TPD_SimulatorExtension, TPD_EXTENSION_SIMULATOR, nullptr,
                            TPD_SIMULATOR_CONTROL_FUNCTIONS)
TPD_DRIVER_DEFINE_EXTENSION(profiler, TPD_ProfilerExtension, TPD_EXTENSION_PROFILER, &controls::extension,
                            TPD_PROFILER_FUNCTIONS)
TPD_DRIVER_DEFINE_EXTENSION(ipc, TPD_IpcExtension, TPD_EXTENSION_IPC, &profiler::extension, TPD_IPC_FUNCTIONS)
TPD_DRIVER_DEFINE_EXTENSION(modules, TPD_KernelModulesExtension, TPD_EXTENSION_KERNEL_MODULES, &ipc::extension,
                            TPD_KERNEL_MODULE_FUNCTIONS, table.image_format = TPD_KERNEL_FORMAT_HOST_ELF;)
TPD_DRIVER_DEFINE_EXTENSION(graphs, TPD_GraphCaptureExtension, TPD_EXTENSION_GRAPH_CAPTURE, &modules::extension,
                            TPD_GRAPH_CAPTURE_FUNCTIONS)

namespace {

TPD_Api make_api() {
  TPD_Api table{};
  table.struct_size = TPD_Api_STRUCT_SIZE;
  table.extension_start = &graphs::extension.base;
  table.api_version.major = TPD_API_MAJOR;
  table.api_version.minor = TPD_API_MINOR;
  table.driver_name = "torchplug simulator";
  table.driver_version = TORCHPLUG_SIMULATOR_VERSION;
  table.error_destroy = error_destroy;
  table.error_message = error_message;
  TPD_API_FUNCTIONS(TPD_DRIVER_SET_MEMBER)
  return table;
}

const TPD_Api api = make_api();

}  // namespace
}  // namespace torchplug::simulator

extern "C" __attribute__((visibility("default"))) const TPD_Api* TPD_GetApi(void) {
  return &torchplug::simulator::api;
}
