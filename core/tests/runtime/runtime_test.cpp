// Tests of the simulated accelerator runtime on its own: no torch, no Python.
// Built and run by test_runtime_native.py; prints "N passed, M failed".
#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/errors.h"
#include "runtime/event.h"
#include "runtime/memory_guard.h"
#include "runtime/platform.h"
#include "runtime/stream.h"

using namespace torchplug::runtime;
using Clock = std::chrono::steady_clock;

namespace {

int passed = 0;
int failed = 0;

#define CHECK(condition)                                                                 \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      throw std::runtime_error(std::string("line ") + std::to_string(__LINE__) + ": " #condition); \
    }                                                                                    \
  } while (false)

void run(const char* name, const std::function<void()>& test) {
  try {
    test();
    ++passed;
  } catch (const std::exception& error) {
    ++failed;
    std::cout << "FAILED " << name << ": " << error.what() << "\n";
  }
}

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

void sleep_task(Stream& stream, int milliseconds) {
  stream.enqueue([milliseconds] { std::this_thread::sleep_for(std::chrono::milliseconds(milliseconds)); });
}

// What `call` throws, which must be an `Error`; any other exception propagates.
template <typename Error>
Error thrown_by(const std::function<void()>& call) {
  try {
    call();
  } catch (const Error& error) {
    return error;
  }
  throw std::runtime_error("expected an exception, none was thrown");
}

}  // namespace

int main() {
  run("configure and capacity", [] {
    Platform& p = Platform::get("t_config");
    p.configure(3, 1 << 20);
    CHECK(p.device_count() == 3);
    CHECK(p.capacity(2) == (1u << 20));
    const std::string message = thrown_by<RuntimeError>([&] { p.check_device(3); }).what();
    CHECK(message.find("there are 3 devices") != std::string::npos);
  });

  run("malloc accounting, peak and out of memory", [] {
    Platform& p = Platform::get("t_memory");
    p.configure(2, 1 << 20);
    void* a = p.malloc(0, 600 << 10);
    CHECK(p.device_of(a) == 0);
    CHECK(p.device_of(static_cast<char*>(a) + 100) == 0);
    CHECK(p.stats(0).used_bytes == (600 << 10));
    const auto oom = thrown_by<OutOfMemoryError>([&] { p.malloc(0, 600 << 10); });
    CHECK(oom.requested == (600u << 10) && oom.free == (424u << 10) && !oom.injected);
    CHECK(p.stats(1).used_bytes == 0);  // devices are independent
    p.free(a);
    CHECK(p.stats(0).used_bytes == 0);
    CHECK(p.stats(0).peak_used_bytes == (600 << 10));
    p.reset_peak(0);
    CHECK(p.stats(0).peak_used_bytes == 0);
    void* b = p.malloc(0, 600 << 10);  // fits again after the free
    p.free(b);
  });

  run("fault injection", [] {
    Platform& p = Platform::get("t_faults");
    p.inject_allocation_failures(1, 2);
    int failures = 0;
    for (int i = 0; i < 3; ++i) {
      try {
        p.free(p.malloc(1, 64));
      } catch (const OutOfMemoryError& e) {
        failures += e.injected ? 1 : 0;
      }
    }
    CHECK(failures == 2);
    CHECK(p.stats(1).failed_allocations == 2);
  });

  run("copies between host and devices", [] {
    Platform& p = Platform::get("t_copy");
    std::vector<int> host(1000, 7);
    std::vector<int> back(1000, 0);
    void* d0 = p.malloc(0, 4000);
    void* d1 = p.malloc(1, 4000);
    p.memcpy(d0, host.data(), 4000);
    p.memcpy(d1, d0, 4000);
    p.memcpy(back.data(), d1, 4000);
    CHECK(back == host);
    p.free(d0);
    p.free(d1);
  });

  run("stream runs work asynchronously and in order", [] {
    Stream& s = Platform::get("t_stream").pool_stream(0);
    std::vector<int> order;
    const auto start = Clock::now();
    sleep_task(s, 100);
    s.enqueue([&] { order.push_back(1); });
    s.enqueue([&] { order.push_back(2); });
    CHECK(seconds_since(start) < 0.05);
    CHECK(!s.query());
    s.synchronize();
    CHECK(seconds_since(start) >= 0.095);
    CHECK((order == std::vector<int>{1, 2}));
    CHECK(s.query());
  });

  run("streams overlap", [] {
    Platform& p = Platform::get("t_overlap");
    Stream& a = p.pool_stream(0);
    Stream& b = p.pool_stream(0);
    CHECK(a.id() != b.id());
    const auto start = Clock::now();
    sleep_task(a, 150);
    sleep_task(b, 150);
    a.synchronize();
    b.synchronize();
    const double elapsed = seconds_since(start);
    CHECK(elapsed >= 0.145 && elapsed < 0.28);
  });

  run("async copy on a stream", [] {
    Platform& p = Platform::get("t_async");
    Stream& s = p.pool_stream(0);
    std::vector<char> host(1 << 20, 3);
    void* d = p.malloc(0, host.size());
    sleep_task(s, 50);
    p.memcpy_async(d, host.data(), host.size(), s);
    s.synchronize();
    std::vector<char> back(host.size());
    p.memcpy(back.data(), d, back.size());
    CHECK(back == host);
    p.free(d);
  });

  run("events: query, synchronize, elapsed time, cross-stream wait", [] {
    Platform& p = Platform::get("t_events");
    Stream& s = p.pool_stream(0);
    Event start(true), end(true);
    start.record(s);
    sleep_task(s, 60);
    end.record(s);
    CHECK(!end.query());
    end.synchronize();
    CHECK(end.query());
    const double ms = start.elapsed_ms(end);
    CHECK(ms >= 55 && ms < 500);

    Stream& producer = p.pool_stream(0);
    Stream& consumer = p.pool_stream(0);
    std::atomic<bool> produced{false};
    bool seen = false;
    producer.enqueue([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      produced = true;
    });
    Event ready;
    ready.record(producer);
    ready.block(consumer);
    consumer.enqueue([&] { seen = produced.load(); });
    consumer.synchronize();
    CHECK(seen);

    Event untimed;
    untimed.record(s);
    thrown_by<RuntimeError>([&] { untimed.elapsed_ms(end); });
  });

  run("stream errors surface on synchronize", [] {
    Stream& s = Platform::get("t_errors").pool_stream(0);
    s.enqueue([] { throw RuntimeError("kernel failed"); });
    CHECK(std::string(thrown_by<RuntimeError>([&] { s.synchronize(); }).what()) == "kernel failed");
    s.synchronize();  // reported once
  });

  run("an event recorded after a failure reports it, once", [] {
    Stream& s = Platform::get("t_event_errors").pool_stream(0);
    s.enqueue([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
    s.enqueue([] { throw RuntimeError("kernel failed"); });
    Event after;
    after.record(s);
    CHECK(std::string(thrown_by<RuntimeError>([&] { after.synchronize(); }).what()) == "kernel failed");
    CHECK(!s.has_error());
    s.synchronize();      // reported by the event: not again
    after.synchronize();  // nor by the event twice
    Event clean;
    clean.record(s);
    clean.synchronize();
  });

  run("zero-byte copies take null pointers", [] {
    Platform& p = Platform::get("t_zero_copies");
    p.memcpy(nullptr, nullptr, 0);
    Stream& s = p.pool_stream(0);
    p.memcpy_async(nullptr, nullptr, 0, s);
    s.synchronize();
  });

  run("pinned host memory", [] {
    Platform& p = Platform::get("t_pinned");
    void* h = p.host_malloc(4096);
    CHECK(p.is_host_pinned(h));
    CHECK(p.is_host_pinned(static_cast<char*>(h) + 4095));
    int local = 0;
    CHECK(!p.is_host_pinned(&local));
    p.host_free(h);
    CHECK(!p.is_host_pinned(h));
  });

  run("strict mode grants access only inside kernels", [] {
    set_strict_mode(true);
    Platform& p = Platform::get("t_strict");
    auto* d = static_cast<int*>(p.malloc(0, 4096));
    std::vector<int> host(1024, 5);
    p.memcpy(d, host.data(), 4096);  // copies have access
    {
      KernelAccess access{d};
      CHECK(d[10] == 5);  // a kernel has access
      {
        KernelAccess nested{d};
        d[10] = 6;
      }
      CHECK(d[10] == 6);  // still open for the outer kernel
    }
    std::vector<int> back(1024);
    p.memcpy(back.data(), d, 4096);
    CHECK(back[10] == 6);
    p.free(d);
    set_strict_mode(false);
  });

  run("memory mapped in strict mode is ordinary memory once it is off", [] {
    set_strict_mode(true);
    Platform& p = Platform::get("t_strict_off");
    auto* d = static_cast<int*>(p.malloc(0, 4096));
    std::optional<KernelAccess> window;
    window.emplace(std::initializer_list<const void*>{d});  // open across the switch
    set_strict_mode(false);
    d[0] = 1;  // host code may touch it, as a cached block reused by a pageable copy is
    window.reset();
    d[1] = 2;  // closing a window does not protect it again
    CHECK(d[0] + d[1] == 3);
    set_strict_mode(true);
    {
      KernelAccess access{d};
      CHECK(d[1] == 2);
    }
    p.free(d);
    set_strict_mode(false);
  });

  std::cout << passed << " passed, " << failed << " failed\n";
  return failed == 0 ? 0 : 1;
}
