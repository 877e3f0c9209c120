#include "drivers/simulator/handles.h"

#include <atomic>
#include <cstdio>
#include <iterator>
#include <string>
#include <utility>

#include "drivers/simulator/errors.h"

namespace torchplug::simulator {
namespace {

std::atomic<uintptr_t> next_handle_id{1};

template <typename Handle>
Handle* new_handle() {
  return reinterpret_cast<Handle*>(next_handle_id.fetch_add(1));
}

uintptr_t id_of(const void* handle) { return reinterpret_cast<uintptr_t>(handle); }

std::string address(const void* pointer) {
  char text[2 + 2 * sizeof(void*) + 1];
  std::snprintf(text, sizeof text, "%p", pointer);
  return text;
}

// Leaked on purpose: stream workers may run host functions that call the
// driver while the process exits, after static destructors ran.
std::mutex clients_mutex;
auto* clients = new std::unordered_map<uintptr_t, std::shared_ptr<Client>>();

// The object of `handle` in `map`; `kind` names it in messages ("stream"),
// and `maker` the function that hands such handles out (kind + "_create" if
// null). Every launch looks up its client and stream: the messages' strings
// are built only when there is one to say.
template <typename Map>
typename Map::mapped_type find(const Map& map, const void* handle, const char* kind, const char* maker = nullptr) {
  const auto made_by = [&] { return maker != nullptr ? std::string(maker) : std::string(kind) + "_create"; };
  if (handle == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, std::string("The ") + kind + " is NULL; pass one that " + made_by() + " returned.");
  }
  auto it = map.find(id_of(handle));
  if (it == map.end()) {
    const bool of_client = std::string(kind) != "client";
    throw Error(TPD_INVALID_HANDLE,
                std::string("The ") + kind + " " + address(handle) + " is not a live " + kind +
                    (of_client ? " of this client" : "") + ": it was destroyed, or comes from " +
                    (of_client ? "another client or " : "") + "another driver. Pass a " + kind + " that " +
                    (of_client ? "this client's " : "") + made_by() + " returned and that was not destroyed.");
  }
  return it->second;
}

// A client's handle tables, each operation under the client's `mutex`.
template <typename Handle, typename Map>
Handle* insert_locked(std::mutex& mutex, Map& map, typename Map::mapped_type object) {
  auto* handle = new_handle<Handle>();
  std::lock_guard<std::mutex> lock(mutex);
  map.emplace(id_of(handle), std::move(object));
  return handle;
}

template <typename Map>
typename Map::mapped_type find_locked(std::mutex& mutex, const Map& map, const void* handle, const char* kind,
                                      const char* maker = nullptr) {
  std::lock_guard<std::mutex> lock(mutex);
  return find(map, handle, kind, maker);
}

// Forgets the object of `handle` (as find), returning it; `also` runs on it
// under the lock, for what goes with it.
template <typename Map, typename Also>
typename Map::mapped_type erase_locked(std::mutex& mutex, Map& map, const void* handle, const char* kind,
                                       const char* maker, Also&& also) {
  std::lock_guard<std::mutex> lock(mutex);
  auto object = find(map, handle, kind, maker);
  map.erase(id_of(handle));
  also(object);
  return object;
}

template <typename Map>
typename Map::mapped_type erase_locked(std::mutex& mutex, Map& map, const void* handle, const char* kind) {
  return erase_locked(mutex, map, handle, kind, nullptr, [](const auto&) {});
}

// Refuses `first` and `second` (as the message names them) of different devices;
// `advice` ends the message.
void check_same_device(const char* first, int first_device, const char* second, int second_device,
                       const char* advice) {
  if (first_device != second_device) {
    throw Error(TPD_INVALID_ARGUMENT, std::string("The ") + first + " is of device " + std::to_string(first_device) +
                                          " but " + second + " of device " + std::to_string(second_device) + "; " +
                                          advice + ".");
  }
}

}  // namespace

thread_local const runtime::Stream* host_function_stream = nullptr;

void EventHandle::record(std::shared_ptr<runtime::Stream> stream) {
  check_same_device("event", device_, "the stream it is recorded on", stream->device(),
                    "create the event for the stream's device");
  std::lock_guard<std::mutex> lock(record_mutex_);
  event_.record(*stream);
  recorded_on_ = std::move(stream);
}

std::chrono::steady_clock::time_point EventHandle::completion_time(const std::string& name) const {
  if (!event_.timing_enabled()) {
    throw Error(TPD_UNSUPPORTED, "The " + name + " event was created without timing; create it with "
                                     "TPD_Event_Create_Args.enable_timing = 1 to measure time with it.");
  }
  if (!event_.recorded()) {
    throw Error(TPD_NOT_READY, "The " + name + " event was never recorded; record it on a stream first.");
  }
  const auto time = event_.completion_time();
  if (!time) {
    throw Error(TPD_NOT_READY, "The work before the " + name + " event has not finished yet; wait for it with "
                                   "event_synchronize first.");
  }
  return *time;
}

double EventHandle::milliseconds_since(const EventHandle& start) const {
  // Each device has its own clock, as CUDA's do: a difference between them means nothing.
  check_same_device("start event", start.device_, "the end event", device_,
                    "measure time only between events of one device");
  const auto from = start.completion_time("start");
  const auto to = completion_time("end");
  return std::chrono::duration<double, std::milli>(to - from).count();
}

void Client::check_device(int device) const {
  const int count = platform_.device_count();
  if (device < 0 || device >= count) {
    throw Error(TPD_INVALID_DEVICE, "Device " + std::to_string(device) + " does not exist: the '" + platform_.name() +
                                        "' client has " + std::to_string(count) + " device" + (count == 1 ? "" : "s") +
                                        "; pass an index from 0 to " + std::to_string(count - 1) + ".");
  }
}

TPD_Stream* Client::add_stream(std::shared_ptr<runtime::Stream> stream) {
  return insert_locked<TPD_Stream>(mutex_, streams_, std::move(stream));
}

std::shared_ptr<runtime::Stream> Client::stream(const TPD_Stream* handle) const {
  return find_locked(mutex_, streams_, handle, "stream");
}

std::shared_ptr<runtime::Stream> Client::remove_stream(const TPD_Stream* handle) {
  return erase_locked(mutex_, streams_, handle, "stream");
}

bool Client::owns_stream(const runtime::Stream* stream) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [id, owned] : streams_) {
    if (owned.get() == stream) {
      return true;
    }
  }
  return false;
}

TPD_Event* Client::add_event(std::shared_ptr<EventHandle> event) {
  return insert_locked<TPD_Event>(mutex_, events_, std::move(event));
}

std::shared_ptr<EventHandle> Client::event(const TPD_Event* handle) const {
  return find_locked(mutex_, events_, handle, "event");
}

std::shared_ptr<EventHandle> Client::remove_event(const TPD_Event* handle) {
  return erase_locked(mutex_, events_, handle, "event");
}

TPD_Module* Client::add_module(std::shared_ptr<LoadedModule> module) {
  return insert_locked<TPD_Module>(mutex_, modules_, std::move(module));
}

std::shared_ptr<LoadedModule> Client::module(const TPD_Module* handle) const {
  return find_locked(mutex_, modules_, handle, "module", "module_load");
}

void Client::remove_module(const TPD_Module* handle) {
  // Its functions go with it.
  erase_locked(mutex_, modules_, handle, "module", "module_load", [&](const std::shared_ptr<LoadedModule>& module) {
    for (auto it = functions_.begin(); it != functions_.end();) {
      it = it->second->module == module ? functions_.erase(it) : std::next(it);
    }
  });
}

TPD_Graph* Client::add_graph(std::shared_ptr<const runtime::Stream::Recording> graph) {
  return insert_locked<TPD_Graph>(mutex_, graphs_, std::move(graph));
}

std::shared_ptr<const runtime::Stream::Recording> Client::graph(const TPD_Graph* handle) const {
  return find_locked(mutex_, graphs_, handle, "graph", "end_capture");
}

void Client::remove_graph(const TPD_Graph* handle) { erase_locked(mutex_, graphs_, handle, "graph"); }

TPD_Function* Client::add_function(std::shared_ptr<ModuleFunction> function) {
  return insert_locked<TPD_Function>(mutex_, functions_, std::move(function));
}

std::shared_ptr<ModuleFunction> Client::function(const TPD_Function* handle) const {
  return find_locked(mutex_, functions_, handle, "function", "module_get_function");
}

void Client::add_allocation(void* pointer, size_t size, Origin origin) {
  std::lock_guard<std::mutex> lock(mutex_);
  allocations_.emplace(static_cast<const char*>(pointer), Allocation{size, origin});
}

std::map<const char*, Client::Allocation>::const_iterator Client::holding(const char* address) const {
  auto after = allocations_.upper_bound(address);
  if (after == allocations_.begin()) {
    return allocations_.end();
  }
  auto it = std::prev(after);
  return address < it->first + it->second.size ? it : allocations_.end();
}

void Client::check_device_memory(const void* pointer, size_t size, const char* name) const {
  if (pointer == nullptr) {
    throw Error(TPD_INVALID_ARGUMENT, std::string(name) + " is NULL; pass device memory from memory_allocate.");
  }
  const char* start = static_cast<const char*>(pointer);
  const char* base = nullptr;
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = holding(start);
    if (it != allocations_.end()) {
      base = it->first;
      length = it->second.size;
    }
  }
  if (base == nullptr) {
    std::string message = std::string(name) + " (" + address(pointer) + ") is not device memory of this client";
    if (platform_.device_of(pointer) >= 0) {
      message += ": it belongs to another client of '" + platform_.name() + "'. Use memory of the client you pass.";
    } else if (platform_.is_host_pinned(pointer)) {
      message += ": it is pinned host memory. Pass device memory, or use the copy kind that reads or writes host memory.";
    } else {
      message += ": it was not returned by memory_allocate, or was freed. Pass memory that memory_allocate returned.";
    }
    throw Error(TPD_INVALID_HANDLE, message);
  }
  const size_t available = length - static_cast<size_t>(start - base);
  if (size > available) {
    throw Error(TPD_INVALID_ARGUMENT, "The " + std::to_string(size) + " bytes at " + name + " (" + address(pointer) +
                                          ") run " + std::to_string(size - available) +
                                          " bytes past the end of its allocation of " + std::to_string(length) +
                                          " bytes at " + address(base) + "; pass a smaller size.");
  }
}

void Client::remove_allocation(const void* pointer, Origin origin) {
  const bool opened = origin == Origin::kOpened;
  const std::string call = opened ? "ipc_close: " : "memory_free: ";
  const char* base = static_cast<const char*>(pointer);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = allocations_.find(base);
  if (it != allocations_.end() && it->second.origin == origin) {
    allocations_.erase(it);
    return;
  }
  if (it != allocations_.end()) {
    throw Error(TPD_INVALID_HANDLE, call + address(pointer) +
                                        (opened ? " was allocated by memory_allocate, not mapped; free it with memory_free."
                                                : " was mapped by ipc_open, not allocated; close it with ipc_close."));
  }
  std::string message = call + address(pointer) + " is not " +
                        (opened ? "ipc_open's address of memory this client mapped and did not close yet"
                                : "memory_allocate's address of a live allocation");
  auto inside = holding(base);
  if (inside != allocations_.end()) {
    message += ": it points inside the allocation at " + address(inside->first) + "; pass the address " +
               (opened ? "ipc_open" : "memory_allocate") + " returned.";
  } else {
    message += std::string(" of this client: it was ") + (opened ? "closed" : "freed") +
               " already, or comes from another client or allocator.";
  }
  throw Error(TPD_INVALID_HANDLE, message);
}

void Client::add_host_allocation(void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  host_allocations_.insert(pointer);
}

void Client::remove_host_allocation(const void* pointer) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (host_allocations_.erase(pointer) == 0) {
    throw Error(TPD_INVALID_HANDLE, "host_memory_free: " + address(pointer) +
                                        " is not host_memory_allocate's address of a live allocation of this "
                                        "client: it was freed already, or comes from elsewhere.");
  }
}

void Client::release() {
  decltype(streams_) streams;
  decltype(events_) events;
  decltype(modules_) modules;
  decltype(functions_) functions;
  decltype(graphs_) graphs;
  decltype(allocations_) allocations;
  decltype(host_allocations_) host_allocations;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    streams.swap(streams_);
    events.swap(events_);
    modules.swap(modules_);
    functions.swap(functions_);
    graphs.swap(graphs_);
    allocations.swap(allocations_);
    host_allocations.swap(host_allocations_);
  }
  // Queued work may still use the memory released below.
  for (auto& [id, stream] : streams) {
    stream->wait_idle();
  }
  events.clear();
  streams.clear();
  for (auto& [base, allocation] : allocations) {
    platform_.free(const_cast<char*>(base));  // unmaps what ipc_open mapped
  }
  for (const void* pointer : host_allocations) {
    platform_.host_free(const_cast<void*>(pointer));
  }
}

TPD_Client* register_client(std::shared_ptr<Client> client) {
  auto* handle = new_handle<TPD_Client>();
  std::lock_guard<std::mutex> lock(clients_mutex);
  clients->emplace(id_of(handle), std::move(client));
  return handle;
}

void check_usable(const runtime::Platform& platform) {
  if (platform.in_bad_fork()) {
    const std::string& name = platform.name();
    throw Error(TPD_UNAVAILABLE, "The '" + name + "' devices were in use when this process was forked; their stream "
                                     "threads did not survive the fork, so this child cannot use them. Use them in "
                                     "a process started with spawn instead, or fork before the first use of '" +
                                     name + "'.");
  }
}

std::shared_ptr<Client> live_client(const TPD_Client* handle) {
  std::lock_guard<std::mutex> lock(clients_mutex);
  return find(*clients, handle, "client");
}

std::shared_ptr<Client> find_client(const TPD_Client* handle) {
  auto client = live_client(handle);
  check_usable(client->platform());
  return client;
}

std::shared_ptr<Client> find_client(const TPD_Client* handle, int device) {
  auto client = find_client(handle);
  client->check_device(device);
  return client;
}

std::shared_ptr<Client> unregister_client(const TPD_Client* handle) {
  std::lock_guard<std::mutex> lock(clients_mutex);
  auto client = find(*clients, handle, "client");
  clients->erase(id_of(handle));
  return client;
}

}  // namespace torchplug::simulator
