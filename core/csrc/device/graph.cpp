#include "device/graph.h"

#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include <ATen/core/GraphImplInterface.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>
#include <c10/util/Logging.h>

#include "backend/backend.h"
#include "device/captured_draws.h"
#include "device/generator.h"
#include "driver/stream.h"
#include "launch/stream_trace.h"
#include "memory/device_allocator.h"

namespace torchplug {
namespace {

class DeviceGraph final : public at::GraphImplInterface {
 public:
  DeviceGraph(c10::DeviceType type, const at::GraphImplArgs& args)
      : type_(type),
        keep_graph_(args.keep_graph),
        replay_scope_("torch." + c10::DeviceTypeName(type, /*lower_case=*/true) + ".Graph.replay") {}
  ~DeviceGraph() override {
    try {
      reset();
    } catch (const std::exception& error) {
      LOG(WARNING) << "torchplug could not release a graph: " << error.what();
    }
  }
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  void capture_begin(c10::MempoolId_t pool, at::GraphCaptureMode /*capture_mode*/) override {
    TORCH_CHECK(!capture_stream_.has_value(), "This graph is capturing already; call capture_end() first.");
    TORCH_CHECK(graph_ == nullptr, "This graph holds a capture already; call reset() before capturing again.");
    const c10::Device device(type_, checked_device_index(type_, -1));
    const c10::Stream stream = current_stream(device);
    const std::string name = c10::DeviceTypeName(type_, /*lower_case=*/true);
    TORCH_CHECK(stream.id() != 0, "Graphs are captured on a stream other than ", device,
                "'s default stream, whose work other code waits for: capture inside `with torch.", name,
                ".stream(torch.", name, ".Stream()):` (torch.", name, ".graph does this for you).");
    device_ = device;
    pool_ = pool == c10::MempoolId_t{0, 0} ? new_pool_id() : pool;
    begin_allocate_to_pool(device, pool_, stream.id());
    try {
      translate_runtime_errors([&] { runtime_stream(stream).begin_capture(kept_); });
    } catch (...) {
      end_allocate_to_pool(device, pool_);
      release_pool(device, pool_);
      pool_ = {0, 0};
      throw;
    }
    capture_stream_ = stream;
    trace(TraceKind::kGraphCaptureBegin, stream);
    begin_noting_draws(stream, &generators_);
  }

  void capture_end() override {
    TORCH_CHECK(capture_stream_.has_value(), "This graph is not capturing; call capture_begin() first.");
    const c10::Stream stream = *capture_stream_;
    TORCH_CHECK(current_stream(device_) == stream, "A capture ends on the stream it began on (", stream,
                "), but the current stream is ", current_stream(device_), ".");
    end_noting_draws(stream);
    capture_stream_.reset();
    trace(TraceKind::kGraphCaptureEnd, stream);
    end_allocate_to_pool(device_, pool_);
    driver_stream_ = &runtime_stream(stream);
    graph_ = translate_runtime_errors([&] { return driver_stream_->end_capture(work_count_); });
    if (!keep_graph_) {
      instantiate();
    }
  }

  void instantiate() override {
    TORCH_CHECK(graph_ != nullptr, "There is no captured graph to instantiate; capture one first.");
    instantiated_ = true;
  }

  void replay() override {
    TORCH_CHECK(graph_ != nullptr, "There is no captured graph to replay; capture one first (capture_begin() and "
                                   "capture_end(), or use the graph as a context manager).");
    if (!instantiated_) {
      instantiate();
    }
    // The profiler shows the replay on the host, and the kernels it runs as device activity.
    RECORD_USER_SCOPE(replay_scope_);
    const c10::DeviceGuard device_guard(device_);
    const c10::Stream stream = current_stream(device_);
    std::vector<std::shared_ptr<void>> draws = reserve_draws(stream);
    translate_runtime_errors([&] { runtime_stream(stream).launch_graph(graph_); });
    replayed_on_.insert(stream);
    trace(TraceKind::kGraphReplay, stream);
    if (!draws.empty()) {
      // The draws are done when the replay's work has run.
      translate_runtime_errors([&] { runtime_stream(stream).enqueue([draws = std::move(draws)] {}); });
    }
  }

  void reset() override {
    const bool captured = capture_stream_.has_value() || graph_ != nullptr;
    if (capture_stream_.has_value()) {
      // An abandoned capture (an exception inside it): nothing is kept of it.
      end_noting_draws(*capture_stream_);
      size_t ignored = 0;
      TPD_Graph* partial = translate_runtime_errors([&] {
        return runtime_stream(*capture_stream_).end_capture(ignored);
      });
      runtime_stream(*capture_stream_).destroy_graph(partial);
      end_allocate_to_pool(device_, pool_);
      trace(TraceKind::kGraphCaptureEnd, *capture_stream_);
      capture_stream_.reset();
    }
    if (captured) {
      trace(TraceKind::kGraphReset, c10::Stream(c10::Stream::DEFAULT, device_));
    }
    if (graph_ != nullptr) {
      // The closures the graph's work calls are kept until every replay queued has run.
      translate_runtime_errors([&] {
        driver_stream_->destroy_graph(graph_);
        for (const c10::Stream& stream : replayed_on_) {
          runtime_stream(stream).wait_idle();
        }
      });
      graph_ = nullptr;
      replayed_on_.clear();
    }
    kept_.clear();
    generators_.clear();
    if (pool_ != c10::MempoolId_t{0, 0}) {
      release_pool(device_, pool_);
      pool_ = {0, 0};
    }
    instantiated_ = false;
    work_count_ = 0;
  }

  c10::MempoolId_t pool() const override { return pool_; }

  void enable_debug_mode() override { debug_ = true; }

  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "debug_dump needs enable_debug_mode() first.");
    TORCH_CHECK(graph_ != nullptr, "There is no captured graph to dump; capture one first.");
    std::ofstream out(path);
    TORCH_CHECK(out, "Cannot write the graph dump to ", path, ".");
    out << "torchplug graph on " << device_ << "\n"
        << "work items: " << work_count_ << "\n"
        << "host functions kept: " << kept_.size() << "\n"
        << "memory pool: (" << pool_.first << ", " << pool_.second << ")\n"
        << "generators drawn from: " << generators_.size() << "\n";
  }

 private:
  // Tells a stream sanitizer (launch/stream_trace.h) what the graph does on `stream`.
  void trace(TraceKind kind, c10::Stream stream) const {
    if (stream_trace_enabled()) {
      trace_stream_order({kind, stream.device(), stream.id(), reinterpret_cast<uintptr_t>(this)});
    }
  }

  // Reserves a draw of each generator the graph draws from on `stream`, so
  // that seeding or reading it waits for the replay.
  std::vector<std::shared_ptr<void>> reserve_draws(c10::Stream stream) const {
    std::vector<std::shared_ptr<void>> draws;
    for (const at::Generator& generator : generators_) {
      std::optional<QueuedDraw> draw = queue_draw(generator, stream);
      if (!draw.has_value()) {
        engine_of(generator);  // waits for its draws queued on another stream
        draw = queue_draw(generator, stream);
      }
      if (draw.has_value()) {
        draws.push_back(std::move(draw->pending));
      }
    }
    return draws;
  }

  const c10::DeviceType type_;
  const bool keep_graph_;
  const std::string replay_scope_;
  c10::Device device_{c10::kCPU};
  std::optional<c10::Stream> capture_stream_;
  const driver::Stream* driver_stream_ = nullptr;  // the stream that captured graph_, of its driver client
  c10::MempoolId_t pool_{0, 0};
  driver::Stream::KeptClosures kept_;
  std::vector<at::Generator> generators_;
  std::unordered_set<c10::Stream> replayed_on_;
  TPD_Graph* graph_ = nullptr;
  size_t work_count_ = 0;
  bool instantiated_ = false;
  bool debug_ = false;
};

}  // namespace

void register_graph(c10::DeviceType type) {
  const std::string key = c10::DeviceTypeName(type, /*lower_case=*/false);
  if (at::GraphImplRegistry()->Has(key)) {
    return;
  }
  at::GraphImplRegistry()->Register(
      key, [type](const at::GraphImplArgs& args) -> std::unique_ptr<at::GraphImplInterface> {
        return std::make_unique<DeviceGraph>(type, args);
      });
}

}  // namespace torchplug
