// The kernel-modules extension: module_load, module_unload,
// module_get_function, kernel_launch. An image is loaded from a memory file, so
// no copy of it is left in any file system; its kernels run on the stream's
// worker thread.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "drivers/simulator/entry_points.h"
#include "drivers/simulator/errors.h"
#include "drivers/simulator/handles.h"
#include "drivers/simulator/module_image.h"
#include "runtime/memory_guard.h"

namespace torchplug::simulator {
namespace {

// Room for a kernel's failure message, with its NUL.
constexpr size_t kKernelMessageSize = 4096;

const char kElfMagic[] = {0x7f, 'E', 'L', 'F'};

// Writes `size` bytes at `data` to a new memory file; returns its descriptor.
int memory_file_of(const void* data, size_t size) {
  const int fd = ::memfd_create("torchplug-kernel-module", MFD_CLOEXEC);
  if (fd < 0) {
    throw Error(TPD_OUT_OF_MEMORY, std::string("The simulator could not make a memory file for the module: ") +
                                       std::strerror(errno) + ".");
  }
  const char* bytes = static_cast<const char*>(data);
  size_t written = 0;
  while (written < size) {
    const ssize_t count = ::write(fd, bytes + written, size - written);
    if (count < 0 && errno == EINTR) {
      continue;
    }
    if (count <= 0) {
      const int error = errno;
      ::close(fd);
      throw Error(TPD_OUT_OF_MEMORY, std::string("The simulator could not write the module's image: ") +
                                         std::strerror(error) + ".");
    }
    written += static_cast<size_t>(count);
  }
  return fd;
}

// Runs `function` on its stream's thread: an injected kernel failure or a
// non-zero return fails the stream with the kernel's message.
void run_kernel(runtime::Platform& platform, int device, const ModuleFunction& function,
                const std::vector<TPD_KernelArg>& args) {
  if (platform.take_kernel_failure(device)) {
    throw Error(TPD_EXECUTION_FAILED, "Kernel " + function.name + " failed on " + platform.name() + ":" +
                                          std::to_string(device) +
                                          ": injected kernel failure (the simulator extension's inject_fault "
                                          "with TPD_SIMULATOR_FAIL_KERNELS); it did not run.");
  }
  std::vector<const void*> pointers;
  for (const TPD_KernelArg& arg : args) {
    if (arg.kind == TPD_KERNEL_ARG_POINTER && arg.value.pointer != nullptr) {
      pointers.push_back(arg.value.pointer);
    }
  }
  char message[kKernelMessageSize] = {};
  int status = 0;
  {
    const runtime::KernelAccess access(pointers.data(), pointers.size());  // strict memory mode's window
    status = function.entry(args.data(), args.size(), message, sizeof message);
  }
  if (status != 0) {
    message[sizeof message - 1] = '\0';
    throw Error(TPD_EXECUTION_FAILED, "Kernel " + function.name + " failed: " +
                                          (message[0] != '\0' ? std::string(message)
                                                              : "it returned " + std::to_string(status) +
                                                                    " without a message."));
  }
}

}  // namespace

LoadedModule::~LoadedModule() {
  ::dlclose(library_);
  // An image the loader keeps (one with unique C++ symbols is never unloaded)
  // keeps its name, and so the number of its memory file.
  if (void* kept = ::dlopen(name_.c_str(), RTLD_LAZY | RTLD_NOLOAD)) {
    ::dlclose(kept);
    return;
  }
  ::close(file_);
}

void modules::module_load(TPD_Module_Load_Args& args) {
  auto client = find_client(args.client);
  if (args.image == nullptr || args.image_size == 0) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Module_Load_Args.image is NULL or image_size is 0; pass the bytes of a "
                                      "module image (" TPD_KERNEL_FORMAT_HOST_ELF ").");
  }
  if (args.image_size < sizeof kElfMagic || std::memcmp(args.image, kElfMagic, sizeof kElfMagic) != 0) {
    throw Error(TPD_INVALID_ARGUMENT, "The module image is not an ELF shared object; the simulator loads images "
                                      "of format " TPD_KERNEL_FORMAT_HOST_ELF
                                      " (a shared object built for this host).");
  }
  const int fd = memory_file_of(args.image, args.image_size);
  std::string path = "/proc/self/fd/" + std::to_string(fd);
  void* library = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* reason = ::dlerror();
    ::close(fd);
    throw Error(TPD_INVALID_ARGUMENT, std::string("The module image could not be loaded: ") +
                                          (reason != nullptr ? reason : "unknown reason") +
                                          ". Build it as a shared object for this host whose libraries the "
                                          "dynamic loader finds (its run path).");
  }
  args.module = client->add_module(std::make_shared<LoadedModule>(library, fd, std::move(path)));
}

void modules::module_unload(TPD_Module_Unload_Args& args) { find_client(args.client)->remove_module(args.module); }

void modules::module_get_function(TPD_Module_GetFunction_Args& args) {
  auto client = find_client(args.client);
  auto module = client->module(args.module);
  if (args.name == nullptr || args.name[0] == '\0') {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Module_GetFunction_Args.name is NULL or empty; pass a kernel's name.");
  }
  ::dlerror();
  void* symbol = ::dlsym(module->library(), args.name);
  if (symbol == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, "The module has no kernel named '" + std::string(args.name) +
                                          "'; pass the name of a function the image exports.");
  }
  args.function = client->add_function(std::make_shared<ModuleFunction>(
      ModuleFunction{std::move(module), reinterpret_cast<TPD_HostElfKernel>(symbol), args.name}));
}

void modules::kernel_launch(TPD_Kernel_Launch_Args& args) {
  auto client = find_client(args.client);
  auto stream = client->stream(args.stream);
  auto function = client->function(args.function);
  if (args.args == nullptr && args.arg_count > 0) {
    throw Error(TPD_INVALID_ARGUMENT, "TPD_Kernel_Launch_Args.args is NULL but arg_count is " +
                                          std::to_string(args.arg_count) + "; pass the arguments.");
  }
  std::vector<TPD_KernelArg> kept(args.args, args.args + args.arg_count);
  for (size_t i = 0; i < kept.size(); ++i) {
    const int kind = enum_value(kept[i].kind);
    const std::string name = "Argument " + std::to_string(i) + " of kernel " + function->name;
    if (kind == TPD_KERNEL_ARG_POINTER) {
      if (kept[i].value.pointer != nullptr) {
        client->check_device_memory(kept[i].value.pointer, 1, name.c_str());
      }
    } else if (kind != TPD_KERNEL_ARG_INT64 && kind != TPD_KERNEL_ARG_FLOAT64) {
      throw Error(TPD_INVALID_ARGUMENT, name + " has kind " + std::to_string(kind) +
                                            ", not a TPD_KernelArgKind; pass TPD_KERNEL_ARG_POINTER, "
                                            "TPD_KERNEL_ARG_INT64 or TPD_KERNEL_ARG_FLOAT64.");
    }
  }
  stream->enqueue([&platform = client->platform(), device = stream->device(), function = std::move(function),
                   kept = std::move(kept)] { run_kernel(platform, device, *function, kept); });
}

}  // namespace torchplug::simulator
