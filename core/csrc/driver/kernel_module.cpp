#include "driver/kernel_module.h"

#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <vector>

#include "driver/call_args.h"
#include "driver/device_runtime.h"
#include "driver/driver_library.h"

namespace torchplug::driver {
namespace {

std::mutex modules_mutex;
// Per runtime: its module, or null once it was found to have none. Leaked:
// kernels may launch while the process exits.
auto* modules = new std::map<const DeviceRuntime*, std::unique_ptr<KernelModule>>();

// The bytes of the core's image for `format`; empty when none ships.
std::vector<char> shipped_image(const std::string& format) {
  std::ifstream file(core_folder() + "/device_kernels/" + format + ".so", std::ios::binary);
  if (!file) {
    return {};
  }
  return std::vector<char>(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
}

TPD_Module* load_module(const DeviceRuntime& runtime, const void* image, size_t size) {
  auto args = client_args<TPD_Module_Load_Args>(TPD_Module_Load_Args_STRUCT_SIZE, runtime.client());
  args.image = image;
  args.image_size = size;
  runtime.library().check(runtime.library().kernel_modules()->module_load(&args));
  return args.module;
}

TPD_Function* get_function(const DeviceRuntime& runtime, TPD_Module* module, const char* name) {
  auto args = client_args<TPD_Module_GetFunction_Args>(TPD_Module_GetFunction_Args_STRUCT_SIZE, runtime.client());
  args.module = module;
  args.name = name;
  runtime.library().check(runtime.library().kernel_modules()->module_get_function(&args));
  return args.function;
}

}  // namespace

const char* kernel_image_format(const DeviceRuntime& runtime) {
  const TPD_KernelModulesExtension* extension = runtime.library().kernel_modules();
  return extension == nullptr ? nullptr : extension->image_format;
}

TPD_Function* load_function(DeviceRuntime& runtime, const void* image, size_t size, const char* name) {
  if (kernel_image_format(runtime) == nullptr) {
    throw DriverError(TPD_UNSUPPORTED, "The driver of '" + runtime.name() +
                                           "' loads no kernel modules (no TPD_KernelModulesExtension with an image "
                                           "format), so code cannot be loaded into its devices.");
  }
  return get_function(runtime, load_module(runtime, image, size), name);
}

KernelModule* KernelModule::of(DeviceRuntime& runtime) {
  std::lock_guard<std::mutex> lock(modules_mutex);
  auto found = modules->find(&runtime);
  if (found != modules->end()) {
    return found->second.get();
  }
  std::unique_ptr<KernelModule> module;
  if (const char* format = kernel_image_format(runtime)) {
    const std::vector<char> image = shipped_image(format);
    if (!image.empty()) {
      module.reset(new KernelModule(runtime, load_module(runtime, image.data(), image.size())));
    }
  }
  return modules->emplace(&runtime, std::move(module)).first->second.get();
}

TPD_Function* KernelModule::function(const char* name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto found = functions_.find(name);
  if (found != functions_.end()) {
    return found->second;
  }
  TPD_Function* function = get_function(runtime_, module_, name);
  functions_.emplace(name, function);
  return function;
}

}  // namespace torchplug::driver
