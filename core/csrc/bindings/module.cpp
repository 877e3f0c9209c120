// The one pybind11 module: a thin, int-and-string API over the device
// runtimes (the drivers) and the torch integration, consumed by the Python
// package `torchplug`.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <utility>

#include <ATen/core/Generator.h>
#include <ATen/ops/empty.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/DeviceType.h>
#include <c10/util/Exception.h>

#include "backend/backend.h"
#include "memory/device_allocator.h"
#include "device/generator.h"
#include "memory/host_allocator.h"
#include "memory/worker_scratch.h"
#include "launch/kernel_launch.h"
#include "launch/stream_trace.h"
#include "launch/sync_debug.h"
#include "bindings/compiled_kernels.h"
#include "bindings/fallback_report.h"
#include "bindings/graphs.h"
#include "bindings/kernel_api.h"
#include "driver/driver_library.h"
#include "driver/memory_access.h"
#include "driver/device_runtime.h"

namespace py = pybind11;

namespace torchplug {
namespace {

// The device type of the backend `name` addresses (its device name or its
// dispatch key: "foo", "privateuse1", "hpu").
c10::DeviceType device_type_of(const std::string& name) { return backend(name).type; }

// `name`.current, .peak, .allocated and .freed, as torch.cuda's statistics name them.
void add_stat(py::dict& result, const std::string& name, const c10::CachingAllocator::Stat& stat) {
  result[py::str(name + ".current")] = stat.current;
  result[py::str(name + ".peak")] = stat.peak;
  result[py::str(name + ".allocated")] = stat.allocated;
  result[py::str(name + ".freed")] = stat.freed;
}

py::dict device_stats(const std::string& device_type, int device) {
  const c10::DeviceType type = device_type_of(device_type);
  const auto stats = device_allocator(type).getDeviceStats(static_cast<c10::DeviceIndex>(device));
  py::dict result;
  auto add = [&](const char* name, const c10::CachingAllocator::StatArray& array) {
    static const char* pools[] = {"all", "small_pool", "large_pool"};
    for (size_t pool = 0; pool < array.size(); ++pool) {
      add_stat(result, std::string(name) + "." + pools[pool], array[pool]);
    }
  };
  add("allocation", stats.allocation);
  add("segment", stats.segment);
  add("active", stats.active);
  add("allocated_bytes", stats.allocated_bytes);
  add("reserved_bytes", stats.reserved_bytes);
  add("active_bytes", stats.active_bytes);
  add("requested_bytes", stats.requested_bytes);
  result["num_alloc_retries"] = stats.num_alloc_retries;
  result["num_ooms"] = stats.num_ooms;
  result["num_device_alloc"] = stats.num_device_alloc;
  result["num_device_free"] = stats.num_device_free;
  return result;
}

// The pinned host allocator's statistics, flat as torch.cuda.host_memory_stats() gives them.
py::dict host_stats(const std::string& device_type) {
  const at::HostStats stats = at::getHostAllocator(device_type_of(device_type))->get_stats();
  py::dict result;
  auto add_duration = [&](const char* name, const c10::CachingAllocator::DurationStat& stat) {
    const std::string prefix = std::string(name) + ".";
    result[py::str(prefix + "total")] = stat.total;
    result[py::str(prefix + "max")] = stat.max;
    result[py::str(prefix + "min")] = stat.min;
    result[py::str(prefix + "count")] = stat.count;
    result[py::str(prefix + "avg")] = stat.count == 0 ? 0 : stat.total / stat.count;
  };
  add_stat(result, "allocations", stats.allocations);
  add_stat(result, "allocated_bytes", stats.allocated_bytes);
  add_stat(result, "active_requests", stats.active_requests);
  add_stat(result, "active_bytes", stats.active_bytes);
  add_duration("host_alloc_time", stats.host_alloc_time);
  add_duration("host_free_time", stats.host_free_time);
  result["num_host_alloc"] = stats.num_host_alloc;
  result["num_host_free"] = stats.num_host_free;
  return result;
}

template <typename Fn>
decltype(auto) with_torch_errors(Fn&& fn) {
  return translate_runtime_errors(std::forward<Fn>(fn));
}

// The device runtime `name` addresses (see device_runtime_named), opening the
// simulator's for a name not opened yet.
driver::DeviceRuntime& runtime_named(const std::string& name) {
  return with_torch_errors([&]() -> driver::DeviceRuntime& { return device_runtime_named(name); });
}

// What `torchplug doctor` shows of a backend's driver.
py::dict driver_info(const std::string& name) {
  driver::DeviceRuntime& runtime = runtime_named(name);
  const driver::DriverLibrary& library = runtime.library();
  py::dict result;
  result["library"] = library.path();
  result["name"] = library.name();
  result["version"] = library.version();
  result["interface"] = std::to_string(library.api().api_version.major) + "." +
                        std::to_string(library.api().api_version.minor);
  result["core_interface"] = std::to_string(TPD_API_MAJOR) + "." + std::to_string(TPD_API_MINOR);
  const uint64_t capabilities = with_torch_errors([&] { return runtime.capabilities(); });
  py::list names;
  const std::pair<uint64_t, const char*> known[] = {
      {TPD_CAPABILITY_HOST_ADDRESSABLE_MEMORY, "host_addressable_memory"},
      {TPD_CAPABILITY_PEER_COPY, "peer_copy"},
      {TPD_CAPABILITY_TIMING_EVENTS, "timing_events"},
      {TPD_CAPABILITY_STREAM_PRIORITIES, "stream_priorities"},
  };
  for (const auto& [bit, label] : known) {
    if ((capabilities & bit) != 0) {
      names.append(label);
    }
  }
  result["capabilities"] = names;
  py::list extensions;
  if (library.ipc() != nullptr) {
    extensions.append("ipc");
  }
  if (library.profiler() != nullptr) {
    extensions.append("profiler");
  }
  if (library.simulator() != nullptr) {
    extensions.append("simulator");
  }
  result["extensions"] = extensions;
  return result;
}

}  // namespace
}  // namespace torchplug

PYBIND11_MODULE(_C, m) {
  using namespace torchplug;
  m.doc() = "torchplug native core: simulated accelerator runtime and its torch integration.";
  m.attr("TORCH_BUILD_VERSION") = TORCHPLUG_TORCH_BUILD_VERSION;
  // For plugins' native kernels: torchplug/kernel_api.h.
  m.attr("_kernel_api") = kernel_api_capsule();
  bind_compiled_kernels(m);
  bind_fallback_report(m);
  bind_graphs(m);

  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) {
        std::rethrow_exception(error);
      }
    } catch (const c10::OutOfMemoryError& e) {
      py::object oom = py::module_::import("torch").attr("OutOfMemoryError");
      PyErr_SetString(oom.ptr(), e.what_without_backtrace());
    } catch (const c10::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what_without_backtrace());
    }
  });

  m.def(
      "register_backend",
      [](const std::string& device_type, const std::string& name) { register_backend(device_type, name); },
      py::arg("device_type"), py::arg("name"));
  m.def(
      "open_driver",
      [](const std::string& name, const std::string& path, const std::string& options) {
        open_backend_driver(name, path, options);
      },
      py::arg("name"), py::arg("path"), py::arg("options") = "");
  m.def("driver_info", &driver_info);
  m.def("host_addressable", [](const std::string& name) { return backend(name).host_addressable; });
  m.def("opened_drivers", &driver::DeviceRuntime::opened_names);
  m.def("default_driver_path", &driver::default_driver_path);
  m.attr("DRIVER_API_VERSION") = py::make_tuple(TPD_API_MAJOR, TPD_API_MINOR);

  // Device runtime controls (a backend's driver; some the simulator's only).
  m.def("configure", [](const std::string& name, int device_count, size_t capacity) {
    driver::DeviceRuntime& runtime = runtime_named(name);
    if (runtime.is_simulator()) {  // another driver's devices are what they are
      with_torch_errors([&] { runtime.configure(device_count, capacity); });
    }
  });
  m.def("device_count", [](const std::string& name) { return runtime_named(name).device_count(); });
  m.def("capacity", [](const std::string& name, int device) {
    return with_torch_errors([&] { return runtime_named(name).capacity(device); });
  });
  m.def("is_initialized", [](const std::string& name) { return runtime_named(name).initialized(); });
  m.def("in_bad_fork", [](const std::string& name) { return runtime_named(name).in_bad_fork(); });
  m.def("current_device", [](const std::string& name) { return runtime_named(name).current_device(); });
  m.def("set_device", [](const std::string& name, int device) {
    with_torch_errors([&] { runtime_named(name).set_current_device(device); });
  });
  m.def("synchronize", [](const std::string& device_type, int device) {
    const c10::DeviceType type = device_type_of(device_type);
    {
      py::gil_scoped_release no_gil;
      with_torch_errors([&] { device_runtime(type).synchronize(device); });
    }
    trace_stream_order({TraceKind::kDeviceSynchronize, c10::Device(type, static_cast<c10::DeviceIndex>(device))});
  });
  m.def("registered_backends", &registered_backend_names);
  m.def("set_stream_trace_enabled", &set_stream_trace_enabled);
  m.def("take_stream_trace", [] {
    static const char* kinds[] = {"event_record", "event_wait", "event_synchronize", "event_destroy",
                                  "stream_synchronize", "device_synchronize", "memory_free", "memory_record_stream",
                                  "graph_capture_begin", "graph_capture_end", "graph_replay", "graph_reset"};
    py::list result;
    for (const TraceEntry& entry : take_stream_trace()) {
      result.append(py::make_tuple(kinds[static_cast<int>(entry.kind)], entry.device.type() == c10::kCPU ? -1 : static_cast<int>(entry.device.index()),
                                   entry.stream, entry.handle, c10::DeviceTypeName(entry.device.type(), /*lower_case=*/true)));
    }
    return result;
  });
  m.def("runtime_stats", [](const std::string& name, int device) {
    const auto stats = with_torch_errors([&] { return runtime_named(name).stats(device); });
    py::dict result;
    result["used_bytes"] = stats.used_bytes;
    result["peak_used_bytes"] = stats.peak_used_bytes;
    result["allocation_count"] = stats.allocation_count;
    result["free_count"] = stats.free_count;
    result["failed_allocations"] = stats.failed_allocations;
    return result;
  });
  m.def("inject_allocation_failures", [](const std::string& name, int device, int count) {
    with_torch_errors([&] { runtime_named(name).inject_allocation_failures(device, count); });
  });
  m.def("inject_kernel_failures", [](const std::string& name, int device, int count) {
    with_torch_errors([&] { runtime_named(name).inject_kernel_failures(device, count); });
  });
  m.def("launch_blocking", &launch_blocking);
  m.def("strict_mode", &driver::strict_memory);
  m.def("set_strict_mode", [](bool enabled) { with_torch_errors([&] { driver::set_strict_memory(enabled); }); });
  m.def("sleep_on_stream", [](const std::string& name, int device, int64_t stream_id, double milliseconds) {
    driver::DeviceRuntime& runtime = runtime_named(name);
    with_torch_errors([&] { runtime.sleep(runtime.stream(device, stream_id), milliseconds); });
  });

  // Torch integration (layer 2) queries.
  m.def("memory_stats", [](const std::string& device_type, int device) { return device_stats(device_type, device); });
  m.def("empty_cache", [](const std::string& device_type) { device_allocator(device_type_of(device_type)).emptyCache(); });
  m.def("worker_scratch_bytes", &cached_worker_scratch_bytes);
  m.def("reset_peak_memory_stats", [](const std::string& device_type, int device) {
    device_allocator(device_type_of(device_type)).resetPeakStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("reset_accumulated_memory_stats", [](const std::string& device_type, int device) {
    device_allocator(device_type_of(device_type)).resetAccumulatedStats(static_cast<c10::DeviceIndex>(device));
  });
  m.def("set_memory_fraction", [](const std::string& device_type, int device, double fraction) {
    set_memory_fraction(device_type_of(device_type), static_cast<c10::DeviceIndex>(device), fraction);
  });
  m.def("memory_fraction", [](const std::string& device_type, int device) {
    return memory_fraction(device_type_of(device_type), static_cast<c10::DeviceIndex>(device));
  });
  m.def("mem_get_info", [](const std::string& device_type, int device) {
    return device_allocator(device_type_of(device_type)).getMemoryInfo(static_cast<c10::DeviceIndex>(device));
  });
  m.def("device_type_id", [](const std::string& device_type) { return static_cast<int>(device_type_of(device_type)); });
  m.def("current_stream_id", [](const std::string& device_type, int device) {
    const c10::DeviceType type = device_type_of(device_type);
    return current_stream(c10::Device(type, static_cast<c10::DeviceIndex>(device))).id();
  });
  m.def("set_current_stream", [](const std::string& device_type, int device, int64_t stream_id) {
    const c10::DeviceType type = device_type_of(device_type);
    set_current_stream(c10::Stream(c10::Stream::UNSAFE, c10::Device(type, static_cast<c10::DeviceIndex>(device)), stream_id));
  });

  // Default generators of each device.
  auto generator = [](const std::string& device_type, int device) -> const at::Generator& {
    return default_generator(c10::Device(device_type_of(device_type), static_cast<c10::DeviceIndex>(device)));
  };
  m.def("manual_seed", [generator](const std::string& device_type, int device, uint64_t seed) {
    at::Generator gen = generator(device_type, device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_current_seed(seed);
  });
  m.def("seed", [generator](const std::string& device_type, int device) {
    at::Generator gen = generator(device_type, device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.seed();
  });
  m.def("initial_seed", [generator](const std::string& device_type, int device) {
    at::Generator gen = generator(device_type, device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    return gen.current_seed();
  });
  m.def("get_rng_state", [generator](const std::string& device_type, int device) {
    at::Generator gen = generator(device_type, device);
    std::lock_guard<std::mutex> lock(gen.mutex());
    const at::Tensor state = gen.get_state();
    return py::bytes(static_cast<const char*>(state.const_data_ptr()), state.nbytes());
  });
  m.def("set_rng_state", [generator](const std::string& device_type, int device, const std::string& state) {
    at::Generator gen = generator(device_type, device);
    at::Tensor tensor = at::empty({static_cast<int64_t>(state.size())}, at::TensorOptions().dtype(at::kByte));
    std::memcpy(tensor.mutable_data_ptr(), state.data(), state.size());
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(tensor);
  });

  m.def("host_memory_stats", &host_stats);
  m.def("reset_peak_host_memory_stats", [](const std::string& device_type) {
    at::getHostAllocator(device_type_of(device_type))->reset_peak_stats();
  });
  m.def("reset_accumulated_host_memory_stats", [](const std::string& device_type) {
    at::getHostAllocator(device_type_of(device_type))->reset_accumulated_stats();
  });
  m.def("set_sync_debug_mode", [](const std::string& device_type, int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "sync debug mode ", mode, " is not one of 0 (default), 1 (warn), 2 (error).");
    set_sync_debug_mode(device_type_of(device_type), static_cast<SyncDebugMode>(mode));
  });
  m.def("sync_debug_mode", [](const std::string& device_type) {
    return static_cast<int>(sync_debug_mode(device_type_of(device_type)));
  });
  m.def("host_waits", [](const std::string& device_type) {
    const HostWaitCounts counts = host_wait_counts(device_type_of(device_type));
    return py::make_tuple(counts.requested, counts.implicit);
  });
  m.def("reset_host_waits", [](const std::string& device_type) { reset_host_wait_counts(device_type_of(device_type)); });
}
