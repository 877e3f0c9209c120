#include <memory>

#include <torch/library.h>

#include "aten/backend.h"
#include "aten/cpu_fallback.h"
#include "aten/device_allocator.h"
#include "aten/device_guard.h"
#include "aten/host_alias.h"
#include "aten/host_allocator.h"
#include "aten/kernels.h"
#include "aten/library_registry.h"

namespace torchplug {

void register_factory_kernels(torch::Library& library);
void register_copy_kernels(torch::Library& library);
void register_native_kernels(torch::Library& library);
void register_host_kernels(torch::Library& library);
void register_math_bit_copies();

void register_kernels(c10::DeviceType type) {
  register_math_bit_copies();
  register_once(type, [type] {
    const c10::DispatchKey key = c10::computeDispatchKey(std::nullopt, std::nullopt, c10::Device(type));
    auto kernels = std::make_unique<torch::Library>(torch::Library::IMPL, "aten", key, __FILE__, __LINE__);
    register_factory_kernels(*kernels);
    register_copy_kernels(*kernels);
    register_native_kernels(*kernels);
    register_host_kernels(*kernels);
    auto fallback = std::make_unique<torch::Library>(torch::Library::IMPL, "_", key, __FILE__, __LINE__);
    fallback->fallback(torch::CppFunction::makeFromBoxedFunction<&aliasing_cpu_fallback>());
    Libraries libraries;
    libraries.push_back(std::move(kernels));
    libraries.push_back(std::move(fallback));
    return libraries;
  });
}

}  // namespace torchplug
