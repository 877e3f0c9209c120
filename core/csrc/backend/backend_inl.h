#pragma once
#include <c10/util/Exception.h>

#include "runtime/errors.h"

namespace torchplug {

template <typename Body>
decltype(auto) translate_runtime_errors(Body&& body) {
  try {
    return body();
  } catch (const runtime::OutOfMemoryError& error) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, error.what(),
                     " Free memory (del tensors, torch.accelerator.empty_cache()), use smaller "
                     "batches, or raise the simulated capacity with TORCHPLUG_DEVICE_MEMORY "
                     "(e.g. TORCHPLUG_DEVICE_MEMORY=16GiB).");
  } catch (const runtime::RuntimeError& error) {
    TORCH_CHECK(false, error.what());
  }
}

}  // namespace torchplug
