#include "memory/host_mirror.h"

#include <algorithm>
#include <cstdint>

#include <ATen/ops/empty_strided.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/TensorOptions.h>

#include "backend/backend.h"
#include "launch/kernel_launch.h"
#include "memory/host_alias.h"

namespace torchplug {
namespace {

// A mirror starts at a multiple of the largest element size (complex128), so
// every tensor's offset into it is a whole number of its elements.
constexpr size_t kSpanAlignment = 16;

// The bytes of its storage a dense tensor covers: [first, last).
std::pair<size_t, size_t> covered_bytes(const at::Tensor& tensor) {
  const auto itemsize = static_cast<int64_t>(tensor.element_size());
  int64_t last_element = tensor.storage_offset();
  for (int64_t dim = 0; dim < tensor.dim(); ++dim) {
    last_element += (tensor.size(dim) - 1) * tensor.stride(dim);
  }
  return {static_cast<size_t>(tensor.storage_offset() * itemsize), static_cast<size_t>((last_element + 1) * itemsize)};
}

const driver::Stream& stream_of(const c10::Storage& storage) {
  return runtime_stream(current_stream(storage.device()));
}

char* device_bytes(const c10::Storage& storage, size_t offset) {
  return static_cast<char*>(storage.unsafeGetStorageImpl()->mutable_data()) + offset;
}

int64_t elements_in(size_t bytes, const at::Tensor& tensor) {
  return static_cast<int64_t>(bytes / tensor.element_size());
}

}  // namespace

HostMirrors::Mirror* HostMirrors::find(const c10::StorageImpl* device_storage) {
  for (Mirror& mirror : mirrors_) {
    if (mirror.device.unsafeGetStorageImpl() == device_storage) {
      return &mirror;
    }
  }
  return nullptr;
}

const HostMirrors::Mirror* HostMirrors::find(const c10::StorageImpl* device_storage) const {
  return const_cast<HostMirrors*>(this)->find(device_storage);
}

void HostMirrors::note(const at::Tensor& tensor) {
  if (!tensor.defined() || tensor.device().is_cpu() || tensor.layout() != c10::kStrided || !tensor.has_storage()) {
    return;
  }
  Mirror* mirror = find(tensor.storage().unsafeGetStorageImpl());
  if (mirror == nullptr) {
    mirror = &mirrors_.emplace_back();
    mirror->device = tensor.storage();
  }
  if (tensor.numel() == 0) {
    return;
  }
  auto [first, last] = covered_bytes(tensor);
  first -= first % kSpanAlignment;
  last = std::min(last, tensor.storage().nbytes());
  const bool empty = mirror->begin == mirror->end;
  mirror->begin = empty ? first : std::min(mirror->begin, first);
  mirror->end = empty ? last : std::max(mirror->end, last);
}

at::Tensor HostMirrors::mirror(const at::Tensor& device_tensor) {
  Mirror* mirror = find(device_tensor.storage().unsafeGetStorageImpl());
  TORCH_INTERNAL_ASSERT(mirror != nullptr, "a tensor was mirrored without being noted first");
  if (!mirror->host) {
    const size_t bytes = mirror->end - mirror->begin;
    mirror->host = c10::Storage(c10::Storage::use_byte_size_t(), bytes, c10::GetCPUAllocator()->allocate(bytes),
                                c10::GetCPUAllocator(), /*resizable=*/true);
  }
  auto host = at::detail::make_tensor<c10::TensorImpl>(c10::Storage(mirror->host),
                                                       c10::DispatchKeySet(c10::DispatchKey::CPU), device_tensor.dtype());
  host.unsafeGetTensorImpl()->set_sizes_and_strides(
      device_tensor.sizes(), device_tensor.strides(),
      device_tensor.storage_offset() - elements_in(mirror->begin, device_tensor));
  host.unsafeGetTensorImpl()->_set_conj(device_tensor.is_conj());
  host.unsafeGetTensorImpl()->_set_neg(device_tensor.is_neg());
  return host;
}

void HostMirrors::download() {
  c10::SmallVector<const driver::Stream*, 2> streams;
  translate_runtime_errors([&] {
    for (const Mirror& mirror : mirrors_) {
      if (mirror.end == mirror.begin || !mirror.host) {
        continue;
      }
      const driver::Stream& stream = stream_of(mirror.device);
      stream.copy_async(mirror.host.mutable_data(), device_bytes(mirror.device, mirror.begin),
                        mirror.end - mirror.begin, TPD_COPY_DEVICE_TO_HOST);
      if (std::find(streams.begin(), streams.end(), &stream) == streams.end()) {
        streams.push_back(&stream);
      }
    }
    for (const driver::Stream* stream : streams) {
      stream->synchronize();
    }
  });
}

void HostMirrors::write_back(const at::Tensor& device_tensor, const at::Tensor& host_tensor) {
  Mirror* mirror = find(device_tensor.storage().unsafeGetStorageImpl());
  TORCH_INTERNAL_ASSERT(mirror != nullptr, "a tensor was written back without being mirrored");
  TORCH_CHECK(host_tensor.storage().unsafeGetStorageImpl() == mirror->host.unsafeGetStorageImpl(),
              "Kernel replaced the storage of a mutable argument; not supported on simulated devices.");
  if (!mirror->written_back) {
    mirror->written_back = true;
    const size_t bytes = mirror->host.nbytes();
    if (mirror->begin + bytes > mirror->device.nbytes()) {
      resize_storage_bytes(mirror->device, mirror->begin + bytes);  // the kernel grew an out= argument
    }
    if (bytes > 0) {
      translate_runtime_errors([&] {
        stream_of(mirror->device)
            .copy_async(device_bytes(mirror->device, mirror->begin), mirror->host.data(), bytes,
                        TPD_COPY_HOST_TO_DEVICE);
      });
    }
    mirror->end = mirror->begin + bytes;
  }
  const int64_t offset = host_tensor.storage_offset() + elements_in(mirror->begin, host_tensor);
  if (host_tensor.sizes() != device_tensor.sizes() || host_tensor.strides() != device_tensor.strides() ||
      offset != device_tensor.storage_offset()) {
    device_tensor.unsafeGetTensorImpl()->set_sizes_and_strides(host_tensor.sizes(), host_tensor.strides(), offset);
  }
}

at::Tensor HostMirrors::device_view_of(const at::Tensor& host_result) const {
  if (!host_result.has_storage()) {
    return at::Tensor();
  }
  const c10::StorageImpl* host_storage = host_result.storage().unsafeGetStorageImpl();
  for (const Mirror& mirror : mirrors_) {
    if (mirror.host && mirror.host.unsafeGetStorageImpl() == host_storage) {
      at::Tensor view = device_view(mirror.device, host_result, device_key_set(mirror.device.device().type()));
      view.unsafeGetTensorImpl()->set_sizes_and_strides(
          host_result.sizes(), host_result.strides(),
          host_result.storage_offset() + elements_in(mirror.begin, host_result));
      return view;
    }
  }
  return at::Tensor();
}

at::Tensor upload_to_device(const at::Tensor& host, c10::Device device) {
  at::Tensor source = host.resolve_conj().resolve_neg();
  if (!source.is_non_overlapping_and_dense()) {
    source = source.contiguous();
  }
  at::Tensor result = at::empty_strided(source.sizes(), source.strides(), source.options().device(device));
  if (source.numel() > 0) {
    // A dense tensor's elements fill one block from its first element on.
    translate_runtime_errors([&] {
      runtime_stream(current_stream(device))
          .copy_async(result.mutable_data_ptr(), source.const_data_ptr(), source.nbytes(), TPD_COPY_HOST_TO_DEVICE);
    });
  }
  return result;
}

}  // namespace torchplug
