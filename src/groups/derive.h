// Communicators derived from another one: Communicator::split and
// split_by_host (include/chorus/communicator.h), and the torch backend's
// new_group.
//
// A derived communicator has links of its own, made without any store the
// job was started with: its ranks meet through the parent.
//
//   1. (split only) An allgather over the whole parent of each rank's
//      (color, key, host identity): every rank learns its group and its
//      rank in it.
//   2. The group's first rank (its leader) opens a set-up point: an
//      in-process world when the parent's ranks are threads (inproc), else a
//      TcpStore server with a fresh secret on an ephemeral port at the
//      address the parent's tcp peers reach it at (127.0.0.1 on one host).
//      It sends where to find it to every other member over the parent
//      (point-to-point messages carrying chorus's own set-up tag).
//   3. Every member builds its transport as init() does (bootstrap's steps
//      2 to 5: host identities, shm inside a host, tcp across, the store
//      barrier) over that store, or joins the in-process world.
//   4. Every member tells the leader how its set-up went, and the leader
//      tells every member the verdict: either all of them have the new
//      communicator or all raise the first member's error (then the
//      leader's store closes, which no member can still need).
//
// Only the members of a group exchange messages in steps 2 to 4, so the
// groups of one split are made side by side, and a group can be made by its
// members alone (derive(), for the torch backend, whose new_group runs only
// on the members).
#pragma once

#include "core/config.h"
#include "core/deadline.h"
#include "store/tcp_store.h"
#include "transport/forwarding_transport.h"
#include "transport/transport.h"

#include <chorus/communicator.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace chorus::detail {

class CommunicatorImpl;

// The outcome of a member's set-up (step 4), and the verdict the leader
// hands every member.
struct Outcome {
  int32_t ok = 1;
  int32_t code = 0;  // ErrorCode of the failure
  char message[504] = {};
};

// Step 2: where the members meet, from the leader.
struct Invitation {
  Outcome opened;       // whether the leader could open it
  uint32_t inproc = 0;  // 1: the in-process world `token`; 0: the store below
  uint32_t port = 0;
  uint64_t token = 0;
  char address[64] = {};
  char secret[72] = {};
};

// What the leader of a set-up keeps open while the members join: the store
// server, or the in-process world's entry (forgotten on destruction).
struct SetupPoint {
  std::unique_ptr<TcpStoreServer> server;
  uint64_t world = 0;
  SetupPoint() = default;
  SetupPoint(const SetupPoint&) = delete;
  SetupPoint& operator=(const SetupPoint&) = delete;
  ~SetupPoint();
};

// Step 2 on the leader: opens the set-up point of a new communicator of
// `members` ranks made from `parent`'s ranks (an in-process world where
// they are threads, else a store server at `at`, or where parent's tcp
// peers reach this rank) and returns the invitation that names it. A
// failure is in the invitation (`opened`), not thrown.
Invitation open_setup(CommunicatorImpl& parent, int members, SetupPoint& point,
                      const std::string& at = "");

// The transport of the rank that opened a store set-up point for a
// communicator that outlives the call which made it (shrink, grow): it keeps
// the store server for as long as the transport lives (the members only need
// it for the set-up, but it must not close before their last read).
class KeepsServer final : public ForwardingTransport {
 public:
  KeepsServer(std::unique_ptr<Transport> inner, std::unique_ptr<TcpStoreServer> server)
      : ForwardingTransport(std::move(inner)), server_(std::move(server)) {}
  ~KeepsServer() override { destroy_inner(); }

 private:
  std::unique_ptr<TcpStoreServer> server_;
};

// Step 3 on every member: its transport in the new communicator, as rank
// `rank` of `size`, with a recovery link of its own.
std::unique_ptr<Transport> join_setup(const Invitation& inv, int rank, int size,
                                      const Config& config, Deadline deadline);

// The communicator of `members` (ranks of `parent`, in the order of their
// rank in the new one; this rank among them). Collective over the members
// only: every member calls it with the same list, in the same order as its
// other calls on the parent. `timeout`, where not 0, replaces the parent's
// default deadline of the new communicator's calls (its set-up keeps the
// parent's).
Communicator derive(Communicator& parent, const std::vector<int>& members,
                    std::chrono::milliseconds timeout = {});

// Communicator::split (by_host false) and split_by_host (by_host true: the
// color is the host's, the key the rank): step 1, then derive() for this
// rank's group; std::nullopt for a negative color.
std::optional<Communicator> split(Communicator& parent, int color, int key, bool by_host);

}  // namespace chorus::detail
