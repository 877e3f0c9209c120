#include "drivers/common/errors.h"

#include <new>

namespace torchplug::drivers {
namespace {

TPD_Error out_of_host_memory{TPD_OUT_OF_MEMORY,
                             "The host ran out of memory inside a torchplug driver; free host memory."};

}  // namespace

TPD_Error* out_of_host_memory_error() noexcept { return &out_of_host_memory; }

TPD_Error* describe_current_exception(const char* function, const char* driver) {
  try {
    throw;
  } catch (const Error& error) {
    return new TPD_Error{error.code(), error.what()};
  } catch (const std::bad_alloc&) {
    return new TPD_Error{TPD_OUT_OF_MEMORY,
                         std::string("The host ran out of memory in ") + function + " of the " + driver +
                             "; free host memory."};
  } catch (const std::exception& error) {
    // The entry points check what they are given first, so anything else is unforeseen.
    return new TPD_Error{TPD_INTERNAL, std::string(function) + " failed unexpectedly: " + error.what() +
                                           " (a defect of the " + driver + "; please report it with this message)."};
  } catch (...) {
    return new TPD_Error{TPD_INTERNAL, std::string(function) +
                                           " failed with an exception that is not a std::exception (a defect of the " +
                                           driver + "; please report it)."};
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

}  // namespace torchplug::drivers
