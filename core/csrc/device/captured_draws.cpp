#include "device/captured_draws.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace torchplug {
namespace {

std::mutex noting_mutex;

std::unordered_map<c10::Stream, std::vector<at::Generator>*>& noting() {
  static auto* streams = new std::unordered_map<c10::Stream, std::vector<at::Generator>*>();  // leaked: used until exit
  return *streams;
}

}  // namespace

void begin_noting_draws(c10::Stream stream, std::vector<at::Generator>* generators) {
  std::lock_guard<std::mutex> lock(noting_mutex);
  noting()[stream] = generators;
}

void end_noting_draws(c10::Stream stream) {
  std::lock_guard<std::mutex> lock(noting_mutex);
  noting().erase(stream);
}

bool note_captured_draw(c10::Stream stream, const at::Generator& generator) {
  std::lock_guard<std::mutex> lock(noting_mutex);
  auto found = noting().find(stream);
  if (found == noting().end()) {
    return false;
  }
  std::vector<at::Generator>& generators = *found->second;
  if (std::find(generators.begin(), generators.end(), generator) == generators.end()) {
    generators.push_back(generator);
  }
  return true;
}

}  // namespace torchplug
