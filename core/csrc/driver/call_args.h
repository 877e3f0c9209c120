#pragma once
// The arguments of one call through a driver's table. Every argument struct of
// torchplug/driver.h starts with struct_size, which the caller sets to its
// header's TPD_<Struct>_STRUCT_SIZE so a driver of another minor version reads
// only the members the core has; a call on a client's devices, memory, streams
// or events names the client next. The members a call does not set stay zero.
#include <cstddef>

#include "torchplug/driver.h"

namespace torchplug::driver {

template <typename Args>
Args client_args(size_t struct_size, TPD_Client* client) {
  Args args{};
  args.struct_size = struct_size;
  args.client = client;
  return args;
}

// For a call on `stream` of `client`.
template <typename Args>
Args stream_args(size_t struct_size, TPD_Client* client, TPD_Stream* stream) {
  Args args = client_args<Args>(struct_size, client);
  args.stream = stream;
  return args;
}

}  // namespace torchplug::driver
