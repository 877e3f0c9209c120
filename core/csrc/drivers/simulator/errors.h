#pragma once
// TPD_Error, and the one place where C++ exceptions become TPD errors: every
// entry point runs its body through `guarded`, so no exception crosses the C
// boundary.
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

namespace torchplug::simulator {

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

// The TPD_Error of the exception being handled; call it only inside a catch block.
TPD_Error* current_exception_error(const char* function) noexcept;

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
#define TPD_CHECKED_ARGS(Type, args) ::torchplug::simulator::checked_args<Type>(args, Type##_STRUCT_SIZE, #Type)

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

// Runs `wait` (a stream's or event's synchronize): a failure of the queued
// work it rethrows is reported as TPD_EXECUTION_FAILED with its message.
template <typename Wait>
void wait_for_work(Wait&& wait) {
  try {
    wait();
  } catch (const std::exception& failure) {
    throw Error(TPD_EXECUTION_FAILED, failure.what());
  }
}

}  // namespace torchplug::simulator
