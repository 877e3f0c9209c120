#pragma once
// For devices whose memory the host cannot address (discrete devices): host
// copies ("mirrors") of the device memory one CPU kernel call reads and
// writes, moved only through the driver's copies. The counterpart of
// host_alias.h, which views the memory in place where the host may.
//
// A mirror holds the span of one device storage that the call's tensors
// cover, so every tensor over that storage keeps its place relative to the
// others: views share one host storage and the CPU kernel sees their overlap
// as it would between CPU tensors, and a result that views an argument maps
// back to a view of the device storage.
#include <cstddef>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>

namespace torchplug {

class HostMirrors {
 public:
  // Notes that the call uses `tensor`: for a dense device tensor, the bytes of
  // its storage it covers. Every operand is noted before the first mirror().
  void note(const at::Tensor& tensor);
  // A CPU tensor with `device_tensor`'s sizes, strides, dtype and math bits
  // over the mirror of its storage (filled by download()).
  at::Tensor mirror(const at::Tensor& device_tensor);
  // Copies every mirrored span to the host, in stream order, and waits for it.
  void download();
  // Copies the mirror of `device_tensor`'s storage back to the device (after
  // a CPU kernel wrote it) and gives `device_tensor` what the kernel did to
  // its mirror's metadata (`host_tensor`: a resize, or a reallocated storage,
  // which grows the device storage). Each storage is copied back once.
  void write_back(const at::Tensor& device_tensor, const at::Tensor& host_tensor);
  // `host_result` as a view of the device storage whose mirror it views;
  // undefined when it views none.
  at::Tensor device_view_of(const at::Tensor& host_result) const;

 private:
  struct Mirror {
    c10::Storage device;
    size_t begin = 0;  // the span of the device storage mirrored, in bytes
    size_t end = 0;
    c10::Storage host;  // end - begin bytes, until a kernel resizes it
    bool written_back = false;
  };
  Mirror* find(const c10::StorageImpl* device_storage);
  const Mirror* find(const c10::StorageImpl* device_storage) const;

  c10::SmallVector<Mirror, 4> mirrors_;
};

// A new device tensor on `device` holding `host`'s values (a CPU kernel's
// fresh result), copied through the driver in the device's stream order.
at::Tensor upload_to_device(const at::Tensor& host, c10::Device device);

}  // namespace torchplug
