// torchplug-device: the device process of the remote driver. The remote driver
// starts it with its end of a socket pair at descriptor 3 and the driver to
// serve as the one argument:
//
//     torchplug-device DRIVER_LIBRARY
//
// It loads that driver (a host-addressable one: the simulator), answers the
// remote driver's requests (server.h) until the using process closes the
// socket or exits, then exits itself.
#include <dlfcn.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "drivers/device_process/server.h"
#include "drivers/remote/protocol.h"
#include "torchplug/driver.h"

namespace {

int fail(const char* what, const char* detail) {
  std::fprintf(stderr, "torchplug-device: %s: %s\n", what, detail);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    return fail("usage", "torchplug-device DRIVER_LIBRARY (started by the torchplug remote driver)");
  }
  ::prctl(PR_SET_NAME, "torchplug-device");
  // Only the socket is this process's: descriptors the using process leaked
  // to it (without close-on-exec) would keep its files and pipes open.
  for (int fd = torchplug::remote::kDeviceProcessSocket + 1; fd < 1024; ++fd) {
    ::close(fd);
  }
  // A using process that is gone is seen as the socket's end; SIGPIPE must not kill us first.
  std::signal(SIGPIPE, SIG_IGN);
  void* library = ::dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    return fail("cannot load the driver", ::dlerror());
  }
  auto get_api = reinterpret_cast<TPD_GetApiFunction>(::dlsym(library, TPD_ENTRY_POINT));
  const TPD_Api* api = get_api == nullptr ? nullptr : get_api();
  if (api == nullptr || api->api_version.major != TPD_API_MAJOR || api->struct_size < TPD_Api_STRUCT_SIZE) {
    return fail("not a usable driver", argv[1]);
  }
  torchplug::device_process::Server server(*api, torchplug::remote::kDeviceProcessSocket);
  server.run();
  // The using process is gone: nothing of its devices is needed any more, and
  // the driver's worker threads may still run its work.
  std::fflush(stderr);
  ::_exit(0);
}
