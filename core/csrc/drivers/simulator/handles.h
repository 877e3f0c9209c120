#pragma once
// A client (the platform of its name plus everything it handed out) and the
// registry of live clients. Handles are ids, not addresses: a handle is only
// ever looked up, so one this driver did not hand out, or already destroyed,
// is reported as TPD_INVALID_HANDLE instead of being dereferenced; and ids are
// never reused, so a stale handle cannot name a newer object.
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "drivers/simulator/module_image.h"
#include "runtime/event.h"
#include "runtime/platform.h"
#include "runtime/stream.h"
#include "torchplug/driver.h"

namespace torchplug::simulator {

// The most urgent stream priority: what torch asks for when it wants a
// high-priority stream (getStreamFromGlobalPool).
constexpr int kStreamPriorityGreatest = -1;

// An event of a client. Once recorded it holds the stream it was recorded on:
// the runtime's event reports a failure on that stream back to it
// (Event::synchronize), so a stream destroyed by stream_destroy lives on,
// idle, while an event recorded on it does.
class EventHandle {
 public:
  EventHandle(int device, bool timing) : device_(device), event_(timing) {}
  int device() const { return device_; }
  runtime::Event& event() { return event_; }
  // Records the event on `stream`: TPD_INVALID_ARGUMENT for a stream of
  // another device than the event's.
  void record(std::shared_ptr<runtime::Stream> stream);
  // When the captured work finished: TPD_UNSUPPORTED unless the event was
  // created with timing, TPD_NOT_READY until it is recorded and the work ran.
  // `name` names the event in messages ("start").
  std::chrono::steady_clock::time_point completion_time(const std::string& name) const;
  // The time from `start`'s completion to this event's, in milliseconds, as
  // event_elapsed_time answers it: TPD_INVALID_ARGUMENT for an event of
  // another device, then as completion_time.
  double milliseconds_since(const EventHandle& start) const;

 private:
  const int device_;  // the device it was created for
  runtime::Event event_;
  std::mutex record_mutex_;
  std::shared_ptr<runtime::Stream> recorded_on_;
};

class Client {
 public:
  explicit Client(runtime::Platform& platform) : platform_(platform) {}
  runtime::Platform& platform() const { return platform_; }
  // The TPD_CAPABILITY_* bits device_get_properties leaves out (the simulator extension's configure).
  uint64_t hidden_capabilities() const { return hidden_capabilities_.load(); }
  void hide_capabilities(uint64_t bits) { hidden_capabilities_.store(bits); }
  // Throws TPD_INVALID_DEVICE unless 0 <= device < device_count.
  void check_device(int device) const;

  TPD_Stream* add_stream(std::shared_ptr<runtime::Stream> stream);
  std::shared_ptr<runtime::Stream> stream(const TPD_Stream* handle) const;
  std::shared_ptr<runtime::Stream> remove_stream(const TPD_Stream* handle);
  bool owns_stream(const runtime::Stream* stream) const;

  TPD_Event* add_event(std::shared_ptr<EventHandle> event);
  std::shared_ptr<EventHandle> event(const TPD_Event* handle) const;
  std::shared_ptr<EventHandle> remove_event(const TPD_Event* handle);

  // Kernel modules (modules.cpp) and their functions. Removing a module
  // removes its functions; queued launches keep what they run.
  TPD_Module* add_module(std::shared_ptr<LoadedModule> module);
  std::shared_ptr<LoadedModule> module(const TPD_Module* handle) const;
  void remove_module(const TPD_Module* handle);
  TPD_Function* add_function(std::shared_ptr<ModuleFunction> function);
  std::shared_ptr<ModuleFunction> function(const TPD_Function* handle) const;

  // Graphs a capture recorded (graphs.cpp).
  TPD_Graph* add_graph(std::shared_ptr<const runtime::Stream::Recording> graph);
  std::shared_ptr<const runtime::Stream::Recording> graph(const TPD_Graph* handle) const;
  void remove_graph(const TPD_Graph* handle);

  // Where device memory of this client came from, and so how it is let go:
  // memory_allocate's is freed with memory_free, ipc_open's closed with ipc_close.
  enum class Origin { kAllocated, kOpened };
  void add_allocation(void* pointer, size_t size, Origin origin);
  // Checks that the `size` bytes at `pointer` (the argument `name`, for
  // messages) are device memory of this client: TPD_INVALID_HANDLE when
  // `pointer` is in none of its allocations, TPD_INVALID_ARGUMENT when the
  // bytes run past the end of the one it is in.
  void check_device_memory(const void* pointer, size_t size, const char* name) const;
  // Forgets the allocation of `origin` starting at `pointer`, which the caller
  // then frees or unmaps: TPD_INVALID_HANDLE for none, or for one of the other origin.
  void remove_allocation(const void* pointer, Origin origin);

  void add_host_allocation(void* pointer);
  // TPD_INVALID_HANDLE unless `pointer` is a live pinned allocation of this client.
  void remove_host_allocation(const void* pointer);

  // Waits for the streams' work, then releases every handle and all memory.
  void release();

 private:
  struct Allocation {
    size_t size;
    Origin origin;
  };
  // The allocation holding `address`, or allocations_.end(); mutex_ is held.
  std::map<const char*, Allocation>::const_iterator holding(const char* address) const;

  runtime::Platform& platform_;
  std::atomic<uint64_t> hidden_capabilities_{0};
  mutable std::mutex mutex_;
  std::unordered_map<uintptr_t, std::shared_ptr<runtime::Stream>> streams_;
  std::unordered_map<uintptr_t, std::shared_ptr<EventHandle>> events_;
  std::unordered_map<uintptr_t, std::shared_ptr<LoadedModule>> modules_;
  std::unordered_map<uintptr_t, std::shared_ptr<ModuleFunction>> functions_;
  std::unordered_map<uintptr_t, std::shared_ptr<const runtime::Stream::Recording>> graphs_;
  std::map<const char*, Allocation> allocations_;  // by base; ordered, to find the one holding an address
  std::set<const void*> host_allocations_;
};

// Throws TPD_UNAVAILABLE in a child forked after `platform`'s devices were
// in use: their stream threads did not survive the fork.
void check_usable(const runtime::Platform& platform);

TPD_Client* register_client(std::shared_ptr<Client> client);
// The live client of `handle`: TPD_INVALID_ARGUMENT for NULL,
// TPD_INVALID_HANDLE for one not live.
std::shared_ptr<Client> live_client(const TPD_Client* handle);
// live_client, also checked usable: what every function but client_destroy uses.
std::shared_ptr<Client> find_client(const TPD_Client* handle);
// find_client for a function that takes a device index, also checked (check_device).
std::shared_ptr<Client> find_client(const TPD_Client* handle, int device);
std::shared_ptr<Client> unregister_client(const TPD_Client* handle);

// Refuses `what` (the call, for the message) on a stream that is capturing a
// graph (TPD_INVALID_ARGUMENT): it would wait for work that never runs.
void check_not_capturing(const runtime::Stream& stream, const char* what);

// The stream whose host function this thread is running, else null: waiting
// for that stream from inside the function would wait for the function itself.
extern thread_local const runtime::Stream* host_function_stream;

}  // namespace torchplug::simulator
