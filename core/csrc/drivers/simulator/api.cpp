// The simulator's function table and its entry point, TPD_GetApi: the one
// symbol the library exports.
#include <cstddef>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "torchplug/driver.h"

#ifndef TORCHPLUG_SIMULATOR_VERSION
#error "TORCHPLUG_SIMULATOR_VERSION (the driver's release) must be defined by the build"
#endif

// Sets `table.member` to the C function of the body `member` (entry_points.h),
// for an entry of a function list used where that list's bodies are in scope:
// the function checks its arguments and runs the body inside `guarded`, with
// the member's name for messages. The tables are filled member by member:
// several members share a type (stream_query, stream_synchronize), which
// positional initialisation could swap unnoticed.
#define TPD_SIMULATOR_SET_MEMBER(member, Args)                              \
  table.member = [](Args* args) noexcept {                                  \
    return guarded(#member, [&] { member(TPD_CHECKED_ARGS(Args, args)); }); \
  };

namespace torchplug::simulator {
namespace {

// An extension table of `type`, its functions still unset, whose chain goes on at `next`.
template <typename Extension>
Extension extension_table(size_t struct_size, TPD_ExtensionType type, const void* next) {
  Extension table{};
  table.base.struct_size = struct_size;
  table.base.type = type;
  table.base.next = static_cast<const TPD_ExtensionBase*>(next);
  return table;
}

}  // namespace

// Defines `space::extension`, the table `Type` of extension `type` whose
// functions (the bodies in namespace `space`) are those of the list
// `FUNCTIONS`, and whose chain goes on at `next`; statements after those set
// its other members.
#define TPD_SIMULATOR_DEFINE_EXTENSION(space, Type, type, next, FUNCTIONS, ...)                  \
  namespace space {                                                                               \
  namespace {                                                                                     \
  Type make_extension() {                                                                         \
    auto table = extension_table<Type>(Type##_STRUCT_SIZE, type, next);                           \
    FUNCTIONS(TPD_SIMULATOR_SET_MEMBER)                                                           \
    __VA_ARGS__                                                                                   \
    return table;                                                                                 \
  }                                                                                               \
  const Type extension = make_extension();                                                        \
  }                                                                                               \
  }

TPD_SIMULATOR_DEFINE_EXTENSION(controls, TPD_SimulatorExtension, TPD_EXTENSION_SIMULATOR, nullptr,
                               TPD_SIMULATOR_CONTROL_FUNCTIONS)
TPD_SIMULATOR_DEFINE_EXTENSION(profiler, TPD_ProfilerExtension, TPD_EXTENSION_PROFILER, &controls::extension,
                               TPD_SIMULATOR_PROFILER_FUNCTIONS)
TPD_SIMULATOR_DEFINE_EXTENSION(ipc, TPD_IpcExtension, TPD_EXTENSION_IPC, &profiler::extension,
                               TPD_SIMULATOR_IPC_FUNCTIONS)
TPD_SIMULATOR_DEFINE_EXTENSION(modules, TPD_KernelModulesExtension, TPD_EXTENSION_KERNEL_MODULES, &ipc::extension,
                               TPD_SIMULATOR_MODULE_FUNCTIONS, table.image_format = TPD_KERNEL_FORMAT_HOST_ELF;)

namespace {

TPD_Api make_api() {
  TPD_Api table{};
  table.struct_size = TPD_Api_STRUCT_SIZE;
  table.extension_start = &modules::extension.base;
  table.api_version.major = TPD_API_MAJOR;
  table.api_version.minor = TPD_API_MINOR;
  table.driver_name = "torchplug simulator";
  table.driver_version = TORCHPLUG_SIMULATOR_VERSION;
  table.error_destroy = error_destroy;
  table.error_message = error_message;
  TPD_SIMULATOR_API_FUNCTIONS(TPD_SIMULATOR_SET_MEMBER)
  return table;
}

const TPD_Api api = make_api();

}  // namespace
}  // namespace torchplug::simulator

extern "C" __attribute__((visibility("default"))) const TPD_Api* TPD_GetApi(void) {
  return &torchplug::simulator::api;
}
