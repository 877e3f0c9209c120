#include "bindings/graphs.h"

#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include <ATen/core/GraphImplInterface.h>
#include <c10/util/Exception.h>

#include "backend/backend.h"
#include "driver/device_runtime.h"
#include "driver/driver_library.h"
#include "driver/stream.h"
#include "memory/device_allocator.h"
#include "memory/segment_source.h"

namespace torchplug {
namespace {

namespace py = pybind11;

using PoolId = std::pair<unsigned long long, unsigned long long>;

at::GraphCaptureMode capture_mode(const std::string& mode) {
  if (mode == "default") {
    return at::GraphCaptureMode::Default;
  }
  if (mode == "global") {
    return at::GraphCaptureMode::Global;
  }
  if (mode == "thread_local") {
    return at::GraphCaptureMode::ThreadLocal;
  }
  TORCH_CHECK(mode == "relaxed", "capture_error_mode is '", mode,
              "'; pass 'default', 'global', 'thread_local' or 'relaxed'.");
  return at::GraphCaptureMode::Relaxed;
}

c10::Device device_of(const std::string& device_type, int device) {
  const c10::DeviceType type = backend(device_type).type;
  return c10::Device(type, checked_device_index(type, static_cast<c10::DeviceIndex>(device)));
}

// A pluggable allocator's functions, given as the addresses Python's ctypes found.
std::shared_ptr<const SegmentSource> segment_source(const std::string& name, uintptr_t allocate, uintptr_t free,
                                                    bool driver_memory) {
  TORCH_CHECK(allocate != 0 && free != 0, "The pluggable allocator ", name, " lacks an allocate or free function.");
  return std::make_shared<const SegmentSource>(SegmentSource{name, reinterpret_cast<SegmentSource::Allocate>(allocate),
                                                             reinterpret_cast<SegmentSource::Free>(free),
                                                             driver_memory});
}

}  // namespace

void bind_graphs(py::module_& module) {
  py::class_<at::GraphImplInterface>(module, "_Graph")
      .def(py::init([](const std::string& device_type, bool keep_graph) {
             at::GraphImplArgs args;
             args.keep_graph = keep_graph;
             std::unique_ptr<at::GraphImplInterface> graph = at::create_graph_impl(backend(device_type).type, args);
             TORCH_CHECK(graph != nullptr, "No graph implementation is registered for '", device_type, "'.");
             return graph;
           }),
           py::arg("device_type"), py::arg("keep_graph") = false)
      .def(
          "capture_begin",
          [](at::GraphImplInterface& graph, std::optional<PoolId> pool, const std::string& mode) {
            graph.capture_begin(pool.value_or(PoolId{0, 0}), capture_mode(mode));
          },
          py::arg("pool") = py::none(), py::arg("capture_error_mode") = "default")
      .def("capture_end", &at::GraphImplInterface::capture_end)
      .def("instantiate", &at::GraphImplInterface::instantiate)
      .def("replay", &at::GraphImplInterface::replay)
      .def("reset", &at::GraphImplInterface::reset, py::call_guard<py::gil_scoped_release>())
      .def("pool", &at::GraphImplInterface::pool)
      .def("enable_debug_mode", &at::GraphImplInterface::enable_debug_mode)
      .def("debug_dump", &at::GraphImplInterface::debug_dump);

  module.def("graph_pool_handle", [] { return new_pool_id(); });
  module.def("is_stream_capturing", [](const std::string& device_type, int device, int64_t stream_id) {
    const c10::Stream stream(c10::Stream::UNSAFE, device_of(device_type, device), stream_id);
    return translate_runtime_errors([&] { return runtime_stream(stream).capturing(); });
  });
  // MemPool and use_mem_pool: the calling thread's allocations on the device go to the pool.
  module.def("begin_allocate_to_pool", [](const std::string& device_type, int device, PoolId pool) {
    begin_allocate_to_pool(device_of(device_type, device), pool, std::nullopt);
  });
  module.def("end_allocate_to_pool", [](const std::string& device_type, int device, PoolId pool) {
    end_allocate_to_pool(device_of(device_type, device), pool);
  });
  module.def("retain_pool", [](const std::string& device_type, int device, PoolId pool) {
    retain_pool(device_of(device_type, device), pool);
  });
  module.def("release_pool", [](const std::string& device_type, int device, PoolId pool) {
    release_pool(device_of(device_type, device), pool);
  });
  // Pluggable allocators: a library's functions serve the device type, or a pool.
  module.def("change_current_allocator", [](const std::string& device_type, const std::string& name,
                                            uintptr_t allocate, uintptr_t free, bool driver_memory) {
    use_segment_source(backend(device_type).type, segment_source(name, allocate, free, driver_memory));
  });
  module.def("set_pool_allocator", [](const std::string& device_type, int device, PoolId pool, const std::string& name,
                                      uintptr_t allocate, uintptr_t free, bool driver_memory) {
    set_pool_source(device_of(device_type, device), pool, segment_source(name, allocate, free, driver_memory));
  });
  // Gives an allocator library the driver's API and client, through which it allocates the device's memory.
  module.def("init_pluggable_allocator", [](const std::string& device_type, uintptr_t init) {
    using Init = void (*)(const TPD_Api* api, TPD_Client* client);
    driver::DeviceRuntime& runtime = device_runtime(backend(device_type).type);
    translate_runtime_errors([&] { runtime.check_usable(); });
    reinterpret_cast<Init>(init)(&runtime.library().api(), runtime.client());
  });
}

}  // namespace torchplug
