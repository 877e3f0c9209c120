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

// Takes `lock`'s mutex, first trying a few dozen times without sleeping: for
// mutexes whose holders keep them for a few instructions (a stream's queue),
// a thread that finds one taken is better off retrying than sleeping, which
// costs it a system call and the holder another to wake it.
template <typename Lock>
void lock_trying_first(Lock& lock) {
  constexpr int kAttempts = 64;
  for (int attempt = 0; attempt < kAttempts; ++attempt) {
    if (lock.try_lock()) {
      return;
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
  }
  lock.lock();
}

}  // namespace torchplug::runtime
