#include "distributed/device_collectives.h"

#include <ATen/ops/div.h>
#include <c10/core/CPUAllocator.h>
#include <string>

#include "distributed/device_work.h"
#include "backend/device_types.h"
#include "torchplug/kernel_scope.h"

namespace torchplug::distributed {
namespace {

std::string device_name(c10::Device device) { return device.str(); }

// A CPU tensor over the bytes of `tensor`. The alias keeps the device storage
// alive, so memory the transport still reads or writes (an async collective
// whose handle was dropped) cannot be freed and reused under it.
at::Tensor alias_on_host(const at::Tensor& tensor) {
  const c10::Storage& storage = tensor.storage();
  auto* keep_alive = new c10::Storage(storage);
  c10::DataPtr data(storage.mutable_data(), keep_alive,
                    [](void* context) { delete static_cast<c10::Storage*>(context); }, c10::Device(c10::kCPU));
  c10::Storage host_storage(c10::Storage::use_byte_size_t(), storage.nbytes(), std::move(data),
                            /*allocator=*/nullptr, /*resizable=*/false);
  auto alias = at::detail::make_tensor<c10::TensorImpl>(std::move(host_storage),
                                                        c10::DispatchKeySet(c10::DispatchKey::CPU), tensor.dtype());
  alias.unsafeGetTensorImpl()->set_sizes_and_strides(tensor.sizes(), tensor.strides(), tensor.storage_offset());
  return alias;
}

// Collectives run on the host as soon as they are issued: like a kernel, they
// enter the device through the core's kernel launch (the kernel SDK's
// KernelScope): the device current, the work already queued on its current
// stream first, strict memory's access to the tensors, a profiler activity,
// an injected kernel failure. The transport then reads and writes host
// aliases of the device memory, which the core allows only for drivers with
// host-addressable memory (it refuses others at registration).
void enter_device(const char* collective, c10::Device device, torchplug::TensorList tensors = {}) {
  const std::string name = std::string("c10d::") + collective;
  const torchplug::KernelScope scope(name.c_str(), device, tensors);
}

std::vector<at::Tensor> flatten(const std::vector<std::vector<at::Tensor>>& lists) {
  std::vector<at::Tensor> all;
  for (const auto& list : lists) {
    all.insert(all.end(), list.begin(), list.end());
  }
  return all;
}

Average split_average(const char* collective, const c10d::ReduceOp& op, const std::vector<at::Tensor>& tensors) {
  if (op.op_ != c10d::ReduceOp::AVG) {
    return {false, op};
  }
  for (const auto& tensor : tensors) {
    TORCH_CHECK(at::isFloatingType(tensor.scalar_type()) || at::isComplexType(tensor.scalar_type()),
                collective, " with ReduceOp.AVG needs floating-point tensors, got ", tensor.scalar_type(),
                ". Use ReduceOp.SUM and divide by the world size yourself, or convert to a float dtype.");
  }
  return {true, c10d::ReduceOp(c10d::ReduceOp::SUM)};
}

std::function<void()> divide_by(int size, std::vector<at::Tensor> host_outputs) {
  return [size, host_outputs = std::move(host_outputs)]() mutable {
    for (auto& output : host_outputs) {
      output.div_(size);
    }
  };
}

template <typename Options>
Options with_transport_op(Options opts, const Average& average) {
  opts.reduceOp = average.transport_op;
  return opts;
}

}  // namespace

DeviceCollectives::DeviceCollectives(c10::intrusive_ptr<c10d::Backend> transport,
                                     c10::intrusive_ptr<c10d::Backend> checks, int rank, int size,
                                     const std::vector<c10::DeviceType>& staged)
    : c10d::Backend(rank, size), transport_(std::move(transport)), agreement_(std::move(checks)),
      devices_(kDeviceTypeCount), staged_(kDeviceTypeCount, false) {
  TORCH_CHECK(transport_, "The torchplug collective backend needs a transport backend (Gloo).");
  for (const c10::DeviceType type : staged) {
    staged_[static_cast<size_t>(type)] = true;
  }
}

void DeviceCollectives::setBoundDeviceId(std::optional<at::Device> device) {
  c10d::Backend::setBoundDeviceId(device);
  if (device.has_value() && device->type() != c10::kCPU) {
    devices_[static_cast<size_t>(device->type())] = *device;
  }
}

void DeviceCollectives::setTimeout(std::chrono::milliseconds timeout) { transport_->setTimeout(timeout); }

void DeviceCollectives::check_device(const char* collective, const at::Tensor& tensor) {
  const c10::Device device = tensor.device();
  TORCH_CHECK(device.type() != c10::kCPU && device.type() != c10::kMeta, collective, " got a tensor on ",
              device_name(device), ", but the '", kBackendName,
              "' backend moves tensors of simulated devices only. Move the tensor to the device, or give CPU "
              "tensors a backend of their own: init_process_group(\"cpu:gloo,<device>:",
              kBackendName, "\").");
  TORCH_CHECK(device.has_index(), collective, " got a tensor without a device index.");
  std::optional<at::Device>& bound = devices_[static_cast<size_t>(device.type())];
  if (!bound.has_value()) {
    bound = device;
    return;
  }
  TORCH_CHECK(*bound == device, collective, " got a tensor on ", device_name(device), ", but this process group ",
              "drives ", device_name(*bound), " in this process (bound by device_id= at init_process_group, or by ",
              "the first collective). Each rank uses one device: move the tensor to ", device_name(*bound),
              ", and call torch.", c10::DeviceTypeName(device.type(), /*lower_case=*/true),
              ".set_device(LOCAL_RANK) before the first collective.");
}

at::Tensor DeviceCollectives::host_view(const char* collective, const at::Tensor& tensor) {
  check_device(collective, tensor);
  if (stages(tensor)) {
    // A blocking copy, after the work queued on the device's current stream.
    return tensor.to(c10::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }
  enter_device(collective, tensor.device(), {tensor});
  return alias_on_host(tensor);
}

std::vector<at::Tensor> DeviceCollectives::host_views(const char* collective, const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> views;
  views.reserve(tensors.size());
  for (const auto& tensor : tensors) {
    views.push_back(host_view(collective, tensor));
  }
  return views;
}

std::vector<std::vector<at::Tensor>> DeviceCollectives::host_views(
    const char* collective, const std::vector<std::vector<at::Tensor>>& tensors) {
  std::vector<std::vector<at::Tensor>> views;
  views.reserve(tensors.size());
  for (const auto& list : tensors) {
    views.push_back(host_views(collective, list));
  }
  return views;
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::work(c10::intrusive_ptr<c10d::Work> transport_work,
                                                       std::vector<at::Tensor> outputs,
                                                       std::vector<at::Tensor> host_outputs, c10d::OpType op_type,
                                                       std::function<void()> finish) {
  std::vector<std::pair<at::Tensor, at::Tensor>> copies_back;
  for (size_t i = 0; i < host_outputs.size(); ++i) {
    if (stages(outputs[i])) {
      copies_back.emplace_back(outputs[i], host_outputs[i]);
    }
  }
  if (!copies_back.empty()) {
    finish = [finish = std::move(finish), copies_back = std::move(copies_back)] {
      if (finish) {
        finish();
      }
      for (const auto& [device_output, host_output] : copies_back) {
        device_output.copy_(host_output);
      }
    };
  }
  return c10::make_intrusive<DeviceWork>(std::move(transport_work), std::move(outputs), op_type, getRank(),
                                         std::move(finish));
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::reduction_work(c10::intrusive_ptr<c10d::Work> transport_work,
                                                                 std::vector<at::Tensor> outputs, c10d::OpType op_type,
                                                                 const Average& average,
                                                                 std::vector<at::Tensor> host_outputs) {
  std::function<void()> finish = average.requested ? divide_by(getSize(), host_outputs) : nullptr;
  return work(std::move(transport_work), std::move(outputs), std::move(host_outputs), op_type, std::move(finish));
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  auto views = host_views("broadcast", tensors);
  agreement_.require("broadcast", c10d::OpType::BROADCAST, tensors);
  return work(transport_->broadcast(views, opts), tensors, views, c10d::OpType::BROADCAST);
}

template <typename CollectiveOptions>
c10::intrusive_ptr<c10d::Work> DeviceCollectives::reduce_in_place(
    const char* collective, c10d::OpType op_type, std::vector<at::Tensor>& tensors, const CollectiveOptions& opts,
    bool receives_result, TransportCall<std::vector<at::Tensor>&, const CollectiveOptions&> transport_call) {
  const Average average = split_average(collective, opts.reduceOp, tensors);
  auto views = host_views(collective, tensors);
  agreement_.require(collective, op_type, tensors);
  auto work = (transport_.get()->*transport_call)(views, with_transport_op(opts, average));
  return reduction_work(std::move(work), tensors, op_type, receives_result ? average : Average{}, views);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  return reduce_in_place("all_reduce", c10d::OpType::ALLREDUCE, tensors, opts, /*receives_result=*/true,
                         &c10d::Backend::allreduce);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  return reduce_in_place("all_reduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED, tensors, opts,
                         /*receives_result=*/true, &c10d::Backend::allreduce_coalesced);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  return reduce_in_place("reduce", c10d::OpType::REDUCE, tensors, opts, /*receives_result=*/getRank() == opts.rootRank,
                         &c10d::Backend::reduce);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::gather_into_lists(
    const char* collective, c10d::OpType op_type, std::vector<std::vector<at::Tensor>>& outputs,
    std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts,
    TransportCall<std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&, const c10d::AllgatherOptions&>
        transport_call) {
  auto output_views = host_views(collective, outputs);
  auto input_views = host_views(collective, inputs);
  agreement_.require(collective, op_type, inputs);
  return work((transport_.get()->*transport_call)(output_views, input_views, opts), flatten(outputs),
              flatten(output_views), op_type);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  return gather_into_lists("all_gather", c10d::OpType::ALLGATHER, outputs, inputs, opts, &c10d::Backend::allgather);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  auto output_view = host_view("all_gather_into_tensor", output);
  auto input_view = host_view("all_gather_into_tensor", input);
  agreement_.require("all_gather_into_tensor", c10d::OpType::_ALLGATHER_BASE, {input, output});
  return work(transport_->_allgather_base(output_view, input_view, opts), {output}, {output_view},
              c10d::OpType::_ALLGATHER_BASE);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::allgather_coalesced(std::vector<std::vector<at::Tensor>>& outputs,
                                                                      std::vector<at::Tensor>& inputs,
                                                                      const c10d::AllgatherOptions& opts) {
  return gather_into_lists("all_gather_coalesced", c10d::OpType::ALLGATHER_COALESCED, outputs, inputs, opts,
                           &c10d::Backend::allgather_coalesced);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions& opts) {
  auto output_views = host_views("all_gather_into_tensor_coalesced", outputs);
  auto input_views = host_views("all_gather_into_tensor_coalesced", inputs);
  agreement_.require("all_gather_into_tensor_coalesced", c10d::OpType::COALESCED, inputs);
  return work(transport_->allgather_into_tensor_coalesced(output_views, input_views, opts), outputs, output_views,
              c10d::OpType::COALESCED);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  auto output_views = host_views("gather", outputs);
  auto input_views = host_views("gather", inputs);
  return work(transport_->gather(output_views, input_views, opts), flatten(outputs), flatten(output_views),
              c10d::OpType::GATHER);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  auto output_views = host_views("scatter", outputs);
  auto input_views = host_views("scatter", inputs);
  return work(transport_->scatter(output_views, input_views, opts), outputs, output_views, c10d::OpType::SCATTER);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const Average average = split_average("reduce_scatter", opts.reduceOp, outputs);
  auto output_views = host_views("reduce_scatter", outputs);
  auto input_views = host_views("reduce_scatter", inputs);
  agreement_.require("reduce_scatter", c10d::OpType::REDUCE_SCATTER, flatten(inputs));
  auto work = transport_->reduce_scatter(output_views, input_views, with_transport_op(opts, average));
  return reduction_work(std::move(work), outputs, c10d::OpType::REDUCE_SCATTER, average, output_views);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const Average average = split_average("reduce_scatter_tensor", opts.reduceOp, {output});
  auto output_view = host_view("reduce_scatter_tensor", output);
  auto input_view = host_view("reduce_scatter_tensor", input);
  agreement_.require("reduce_scatter_tensor", c10d::OpType::_REDUCE_SCATTER_BASE, {input, output});
  auto work = transport_->_reduce_scatter_base(output_view, input_view, with_transport_op(opts, average));
  return reduction_work(std::move(work), {output}, c10d::OpType::_REDUCE_SCATTER_BASE, average, {output_view});
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs, const c10d::ReduceScatterOptions& opts) {
  const Average average = split_average("reduce_scatter_tensor_coalesced", opts.reduceOp, outputs);
  auto output_views = host_views("reduce_scatter_tensor_coalesced", outputs);
  auto input_views = host_views("reduce_scatter_tensor_coalesced", inputs);
  agreement_.require("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED, inputs);
  auto work =
      transport_->reduce_scatter_tensor_coalesced(output_views, input_views, with_transport_op(opts, average));
  return reduction_work(std::move(work), outputs, c10d::OpType::COALESCED, average, output_views);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& output_split_sizes,
                                                                std::vector<int64_t>& input_split_sizes,
                                                                const c10d::AllToAllOptions& opts) {
  auto output_view = host_view("all_to_all_single", output);
  auto input_view = host_view("all_to_all_single", input);
  return work(transport_->alltoall_base(output_view, input_view, output_split_sizes, input_split_sizes, opts),
              {output}, {output_view}, c10d::OpType::ALLTOALL_BASE);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  auto output_views = host_views("all_to_all", outputs);
  auto input_views = host_views("all_to_all", inputs);
  return work(transport_->alltoall(output_views, input_views, opts), outputs, output_views, c10d::OpType::ALLTOALL);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::send(std::vector<at::Tensor>& tensors, int dst_rank, int tag) {
  auto views = host_views("send", tensors);
  // What was sent is not copied back: the caller may write the tensor again once send() returned.
  return work(transport_->send(views, dst_rank, tag), tensors, /*host_outputs=*/{}, c10d::OpType::SEND);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::recv(std::vector<at::Tensor>& tensors, int src_rank, int tag) {
  auto views = host_views("recv", tensors);
  return work(transport_->recv(views, src_rank, tag), tensors, views, c10d::OpType::RECV);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::recvAnysource(std::vector<at::Tensor>& tensors, int tag) {
  auto views = host_views("recv", tensors);
  return work(transport_->recvAnysource(views, tag), tensors, views, c10d::OpType::RECVANYSOURCE);
}

c10::intrusive_ptr<c10d::Work> DeviceCollectives::barrier(const c10d::BarrierOptions& opts) {
  c10d::BarrierOptions transport_opts = opts;
  transport_opts.device = std::nullopt;
  transport_opts.device_ids.clear();
  if (opts.device.has_value() && opts.device->type() != c10::kCPU &&
      !staged_[static_cast<size_t>(opts.device->type())]) {
    enter_device("barrier", *opts.device);
  }
  return work(transport_->barrier(transport_opts), {}, {}, c10d::OpType::BARRIER);
}

}  // namespace torchplug::distributed
