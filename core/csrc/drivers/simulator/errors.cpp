#include "drivers/simulator/errors.h"

#include <new>

#include "drivers/simulator/entry_points.h"
#include "runtime/errors.h"

namespace torchplug::simulator {
namespace {

// Returned when the host cannot allocate a TPD_Error at all; error_destroy
// leaves it alone.
TPD_Error out_of_host_memory{TPD_OUT_OF_MEMORY,
                             "The host ran out of memory inside the torchplug simulator driver; free host memory."};

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

TPD_Error* current_exception_error(const char* function) noexcept {
  try {
    try {
      throw;
    } catch (const Error& error) {
      return new TPD_Error{error.code(), error.what()};
    } catch (const runtime::OutOfMemoryError& error) {
      return new TPD_Error{TPD_OUT_OF_MEMORY, out_of_memory_message(error)};
    } catch (const std::bad_alloc&) {
      return new TPD_Error{TPD_OUT_OF_MEMORY, std::string("The host ran out of memory in ") + function +
                                                  " of the torchplug simulator driver; free host memory."};
    } catch (const std::exception& error) {
      // The entry points check what they are given first, so anything else is unforeseen.
      return new TPD_Error{TPD_INTERNAL, std::string(function) + " failed unexpectedly: " + error.what() +
                                             " (a defect of the torchplug simulator driver; please report it "
                                             "with this message)."};
    } catch (...) {
      return new TPD_Error{TPD_INTERNAL, std::string(function) +
                                             " failed with an exception that is not a std::exception (a defect "
                                             "of the torchplug simulator driver; please report it)."};
    }
  } catch (...) {  // making the TPD_Error failed
    return &out_of_host_memory;
  }
}

void error_destroy(TPD_Error_Destroy_Args* args) {
  // No error can be returned from here: an unusable argument is ignored.
  if (args == nullptr || args->struct_size < TPD_Error_Destroy_Args_STRUCT_SIZE ||
      args->error == &out_of_host_memory) {
    return;
  }
  delete args->error;
}

void error_message(TPD_Error_Message_Args* args) {
  if (args == nullptr || args->struct_size < TPD_Error_Message_Args_STRUCT_SIZE) {
    return;
  }
  if (args->error == nullptr) {
    args->message = "";
    args->message_size = 0;
    return;
  }
  args->message = args->error->message.c_str();
  args->message_size = args->error->message.size();
}

void error_get_code(TPD_Error_GetCode_Args& args) {
  if (args.error == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Error_GetCode_Args.error is NULL; pass the error a call returned.");
  }
  args.code = args.error->code;
}

}  // namespace torchplug::simulator
