#pragma once
// Graphs and memory pools for Python: the graph torch.accelerator.Graph
// creates for a device type (device/graph.h), made for a given type, and the
// allocator's private pools (memory/device_allocator.h) for MemPool and
// use_mem_pool, and pluggable allocators (memory/segment_source.h).
#include <pybind11/pybind11.h>

namespace torchplug {

void bind_graphs(pybind11::module_& module);

}  // namespace torchplug
