#pragma once
// The simulator's errors: those of every driver (drivers/common/errors.h),
// and the failure of queued work reported by a wait.
#include <exception>

#include "drivers/common/errors.h"

namespace torchplug::simulator {

using drivers::checked_args;
using drivers::enum_value;
using drivers::Error;
using drivers::guarded;

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
