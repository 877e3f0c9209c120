#pragma once
// Which generators the random operators queued on a capturing stream draw
// from. A capture draws nothing (it runs nothing); the graph reserves those
// generators' draws at each replay (device/graph.cpp), so that seeding waits
// for the replays as it waits for queued draws (device/generator.h).
#include <vector>

#include <ATen/core/Generator.h>
#include <c10/core/Stream.h>

namespace torchplug {

// From now until end_noting_draws, the generators drawn from on `stream` are added to `generators`.
void begin_noting_draws(c10::Stream stream, std::vector<at::Generator>* generators);
void end_noting_draws(c10::Stream stream);
// Called by a random operator queued on `stream`: true (and `generator`
// noted) when the stream is capturing.
bool note_captured_draw(c10::Stream stream, const at::Generator& generator);

}  // namespace torchplug
