#pragma once
// Polling before sleeping. On the machines the simulated devices run on
// (virtual machines above all), waking a sleeping thread costs tens of
// microseconds, longer than most of the waits it would end: a launch follows
// the last one by a few microseconds, a reply comes as soon. So a waiting
// thread first polls for kPollBeforeSleeping, yielding the core between polls
// to the threads it waits for, and only then sleeps (as CUDA's default
// synchronisation spins before it blocks). An idle thread sleeps after that
// moment, so it costs nothing while nothing happens.
#include <chrono>
#include <thread>

namespace torchplug::runtime {

inline constexpr std::chrono::microseconds kPollBeforeSleeping{50};

// Polls `ready` until it returns true (then true) or `how_long` has passed (then false).
template <typename Ready>
bool poll_until(Ready ready, std::chrono::microseconds how_long = kPollBeforeSleeping) {
  const auto deadline = std::chrono::steady_clock::now() + how_long;
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) {
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

}  // namespace torchplug::runtime
