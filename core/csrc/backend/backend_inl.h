#pragma once
#include <c10/util/Exception.h>

#include "driver/driver_library.h"

namespace torchplug {

template <typename Body>
decltype(auto) translate_runtime_errors(Body&& body) {
  try {
    return body();
  } catch (const driver::DriverError& error) {
    TORCH_CHECK_WITH(OutOfMemoryError, error.code() != TPD_OUT_OF_MEMORY, error.what(),
                     " Free memory (del tensors, torch.accelerator.empty_cache()), use smaller "
                     "batches, or raise the simulated capacity with TORCHPLUG_DEVICE_MEMORY "
                     "(e.g. TORCHPLUG_DEVICE_MEMORY=16GiB).");
    TORCH_CHECK(false, error.what());
  }
}

}  // namespace torchplug
