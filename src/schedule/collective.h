// What a schedule builder is asked to build: one collective, one rank, one size.
#pragma once

#include "core/collective.h"

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace chorus {

// The request a builder answers. `count` keeps the meaning it has in the API:
//   allreduce, broadcast, reduce: elements per rank
//   allgather:                    elements each rank contributes (send_count)
//   reduce_scatter:               elements each rank receives (recv_count)
//   alltoall:                     elements per (sender, receiver) block
//   barrier:                      ignored (0)
struct CollectiveSpec {
  Collective collective = Collective::allreduce;
  int nranks = 1;
  int rank = 0;
  size_t count = 0;
  size_t elem_size = 1;
  int root = 0;
  // Pipelining segment for segmented algorithms (trees, chains), in bytes;
  // 0 lets the builder choose its default.
  size_t segment_bytes = 0;
  // The call averages (ReduceOp::avg): the Program ends by dividing the
  // reduced Output by N (OpKind::divide), so every interpreter sees it.
  bool average = false;
  // The ranks share memory windows (one host, a transport that maps them):
  // one-sided algorithms need it and decline without.
  bool windows = false;
  // This rank's Input and Output lie in shared windows (Communicator::window):
  // peers read them in place, and a one-sided Program stages nothing.
  bool window_buffers = false;
  // Which host each rank is on (host_of[r]; equal numbers share a host),
  // shared by the specs of all ranks of a call; null: not known, which is
  // one host. The hierarchical algorithms (hier_*) need several hosts and a
  // host with several ranks (schedule/rank_math.h: HostGroups).
  std::shared_ptr<const std::vector<int>> host_of = nullptr;
};

// Element counts of the Input and Output buffers of a call.
struct BufferCounts {
  size_t input = 0;
  size_t output = 0;
};
BufferCounts buffer_counts(const CollectiveSpec& spec);

// Offset (in elements) of Input inside Output in the in-place form of a call,
// or nullopt where the collective has no in-place form. In-place means Input
// aliases Output at this offset:
//   allreduce, broadcast, reduce: 0
//   allgather:                    rank * count       (input is the rank's block)
//   reduce_scatter:               Output aliases Input at rank * count instead;
//                                 see in_place_output_offset.
std::optional<size_t> in_place_input_offset(const CollectiveSpec& spec);
// reduce_scatter's in-place form is the other way round: Output is a window of
// Input at rank * count.
std::optional<size_t> in_place_output_offset(const CollectiveSpec& spec);

}  // namespace chorus
