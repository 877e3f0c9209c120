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

}  // namespace

KernelModule* KernelModule::of(DeviceRuntime& runtime) {
  std::lock_guard<std::mutex> lock(modules_mutex);
  auto found = modules->find(&runtime);
  if (found != modules->end()) {
    return found->second.get();
  }
  const DriverLibrary& library = runtime.library();
  const TPD_KernelModulesExtension* extension = library.kernel_modules();
  std::unique_ptr<KernelModule> module;
  if (extension != nullptr && extension->image_format != nullptr) {
    const std::vector<char> image = shipped_image(extension->image_format);
    if (!image.empty()) {
      auto args = client_args<TPD_Module_Load_Args>(TPD_Module_Load_Args_STRUCT_SIZE, runtime.client());
      args.image = image.data();
      args.image_size = image.size();
      library.check(extension->module_load(&args));
      module.reset(new KernelModule(runtime, args.module));
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
  auto args = client_args<TPD_Module_GetFunction_Args>(TPD_Module_GetFunction_Args_STRUCT_SIZE, runtime_.client());
  args.module = module_;
  args.name = name;
  runtime_.library().check(runtime_.library().kernel_modules()->module_get_function(&args));
  functions_.emplace(name, args.function);
  return args.function;
}

}  // namespace torchplug::driver
