#pragma once
// What every torchplug driver's entry points share: TPD_Error, the exception
// that carries a code, `guarded` (no C++ exception crosses the C boundary),
// the struct_size check, and the error accessors of the table. Each driver
// library defines current_exception_error, turning its own exceptions into
// TPD errors and the rest through describe_current_exception.
#include <cstddef>
#include <cstring>
#include <exception>
#include <string>
#include <utility>

#include "torchplug/driver.h"

struct TPD_Error {
  TPD_ErrorCode code;
  std::string message;
};

namespace torchplug::drivers {

// A failure an entry point reports with a code it chose.
class Error : public std::exception {
 public:
  Error(TPD_ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  TPD_ErrorCode code() const noexcept { return code_; }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  TPD_ErrorCode code_;
  std::string message_;
};

// The TPD_Error of the exception being handled; call it only inside a catch
// block. Defined by each driver library.
TPD_Error* current_exception_error(const char* function) noexcept;

// The TPD_Error of the exception being handled, for what any driver may
// throw (Error, bad_alloc, other exceptions, named defects of `driver`);
// call it only inside a catch block. May throw std::bad_alloc.
TPD_Error* describe_current_exception(const char* function, const char* driver);

// Returned when the host cannot allocate a TPD_Error at all; error_destroy leaves it alone.
TPD_Error* out_of_host_memory_error() noexcept;

template <typename Body>
TPD_Error* guarded(const char* function, Body&& body) noexcept {
  try {
    body();
    return nullptr;
  } catch (...) {
    return current_exception_error(function);
  }
}

// `args` after checking it is there and at least as large as this header's
// struct: a smaller struct_size comes from a caller whose struct lacks members
// this driver reads or writes.
template <typename Args>
Args& checked_args(Args* args, size_t header_size, const char* name) {
  if (args == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, std::string("The ") + name + " pointer is NULL; pass the address of a " + name +
                                          " with its struct_size set.");
  }
  if (args->struct_size < header_size) {
    throw Error(TPD_VERSION_MISMATCH, std::string(name) + ".struct_size is " + std::to_string(args->struct_size) +
                                          " but this driver needs at least " + std::to_string(header_size) +
                                          "; set it to " + name + "_STRUCT_SIZE of torchplug/driver.h (API " +
                                          std::to_string(TPD_API_MAJOR) + "." + std::to_string(TPD_API_MINOR) + ").");
  }
  return *args;
}

// checked_args for the struct type `Type`, named in messages as the header spells it.
#define TPD_CHECKED_ARGS(Type, args) ::torchplug::drivers::checked_args<Type>(args, Type##_STRUCT_SIZE, #Type)

// The value a caller stored in an enum member (TPD_CopyKind), as an int: it
// may be none of the enumerators, and loading such a value as the enum type
// is undefined behaviour.
template <typename Enum>
int enum_value(const Enum& member) {
  static_assert(sizeof(Enum) == sizeof(int), "C enums are ints");
  int value = 0;
  std::memcpy(&value, &member, sizeof value);
  return value;
}

// TPD_Api's error accessors, the same in every driver.
void error_destroy(TPD_Error_Destroy_Args* args);
void error_message(TPD_Error_Message_Args* args);
void error_get_code(TPD_Error_GetCode_Args& args);

}  // namespace torchplug::drivers
