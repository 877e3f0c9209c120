// How the simulator's exceptions become TPD errors.
#include "drivers/simulator/errors.h"

#include <string>

#include "drivers/simulator/entry_points.h"

#include "runtime/errors.h"

namespace torchplug::simulator {
namespace {

std::string out_of_memory_message(const runtime::OutOfMemoryError& error) {
  std::string message = error.what();
  if (error.device >= 0 && !error.injected) {
    message +=
        " Free device memory with memory_free, or give the devices more with the simulator "
        "extension's configure (before their first allocation or stream).";
  }
  return message;
}

}  // namespace

// In the table through TPD_API_FUNCTIONS (drivers/common/tables.h), with its arguments checked.
void error_get_code(TPD_Error_GetCode_Args& args) { drivers::error_get_code(args); }

}  // namespace torchplug::simulator

namespace torchplug::drivers {

TPD_Error* current_exception_error(const char* function) noexcept {
  try {
    try {
      throw;
    } catch (const runtime::OutOfMemoryError& error) {
      return new TPD_Error{TPD_OUT_OF_MEMORY, simulator::out_of_memory_message(error)};
    } catch (...) {
      return describe_current_exception(function, "torchplug simulator driver");
    }
  } catch (...) {  // making the TPD_Error failed
    return out_of_host_memory_error();
  }
}

}  // namespace torchplug::drivers
