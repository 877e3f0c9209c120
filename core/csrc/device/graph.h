#pragma once
// Graph capture and replay (torch.accelerator.Graph) on torchplug devices,
// through the driver's graph-capture extension: what is queued on the
// capturing stream is recorded, and a replay queues it again. Allocations on
// the capturing stream come from the graph's private pool, which stays
// reserved for the replays; random operators draw from their generator's
// engine at each replay, so their numbers advance from replay to replay.
#include <c10/core/DeviceType.h>

namespace torchplug {

// Registers the graph implementation torch.accelerator.Graph creates for `type`. Idempotent.
void register_graph(c10::DeviceType type);

}  // namespace torchplug
