// Network topologies of the simulator: which links a message crosses between
// two ranks, and the alpha/beta of each.
//
// A route is a list of hops. Each hop is a full message in the model (alpha +
// b/beta on that hop's link class, store and forward): it occupies a send port
// of `from`, a receive port of `to`, and the topology's own link resources on
// the way (a directed ring or hypercube link, a host's network interface).
//
//   switch       every rank one port into a non-blocking switch: one hop, no
//                shared link
//   ring         links r <-> r+1 only; others are reached hop by hop along the
//                shorter way round (ties go to r+1)
//   hypercube    links r <-> r xor 2^k (both ends < N); routes clear the bits
//                to be cleared first, then set the others, lowest bit first,
//                so that every rank on the way is < N
//   hier:K       hosts of K consecutive ranks (make_host_topology: any
//                layout, "hosts"); within a host one hop of class
//                "intra"; across hosts one hop of class "inter" that also
//                occupies the sending host's outgoing interface and the
//                receiving host's incoming one (K ranks share them)
//   FILE.json    {"nodes": N, "links": [{"from": 0, "to": 1, "alpha": "2us",
//                 "beta": "25GB/s", "duplex": true}, ...]}: shortest routes
//                by hop count (ties: lowest next node)
//
// Hosts: ranks may be grouped into hosts, each with the shared resources of
// the machine model (model/machine_model.h): a memory bandwidth that every
// transfer, copy and reduction of its ranks draws on, and a number of cores
// that its ranks' engines share. make_topology's `host` gives them: switch,
// ring and hypercube become one host of all ranks, hier:K hosts of K ranks. A
// JSON topology names its own: "hosts": [[0, 1], [2, 3]], with "memory":
// "40GB/s" and "cores": 2 applying to each host. A topology without hosts (the
// default) has no shared resources: the seeds' model. Ranks on one host share
// memory windows, which the one-sided algorithms read (one_host below).
#pragma once

#include "model/cost_model.h"
#include "model/machine_model.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

inline constexpr uint32_t kNoLink = static_cast<uint32_t>(-1);

struct Hop {
  int from = 0;
  int to = 0;
  uint32_t link_class = 0;                 // index into Topology::classes()
  uint32_t links[2] = {kNoLink, kNoLink};  // shared link resources it occupies
};

class Topology {
 public:
  virtual ~Topology() = default;

  int nranks() const { return nranks_; }
  // Link classes; hops name them by index.
  const std::vector<LinkParams>& classes() const { return classes_; }
  // Number of shared link resources (ids 0..link_count()-1 in Hop::links).
  size_t link_count() const { return links_; }
  // "switch", "ring", "hypercube", "hier:8", "file.json".
  const std::string& name() const { return name_; }
  // Whether every route is a single hop (lets the simulator skip forwarding).
  virtual bool single_hop() const { return false; }

  // Appends the hops from a to b (a != b, both in range) to `hops`.
  virtual void route(int a, int b, std::vector<Hop>& hops) const = 0;

  // Hosts (see above): none by default.
  bool has_hosts() const { return !host_of_.empty(); }
  size_t host_count() const { return hosts_.size(); }
  int host_of(int rank) const { return host_of_[static_cast<size_t>(rank)]; }
  const HostParams& host(int h) const { return hosts_[static_cast<size_t>(h)]; }
  // Groups the ranks: host_of[r] in [0, hosts.size()) for every rank. Throws
  // Error(invalid_argument) when a rank is missing or out of range.
  void set_hosts(std::vector<int> host_of, std::vector<HostParams> hosts);
  // Each rank's host as a call on this topology sees it (CollectiveSpec::
  // host_of): the grouping's where it has one, else one host for switch,
  // ring and hypercube, hier:K's hosts of K, and none (empty) for a JSON
  // topology without "hosts".
  std::vector<int> rank_hosts() const;
  // Whether every rank is on one host, so that the ranks share memory windows
  // (CollectiveSpec::windows: what the one-sided algorithms need). With
  // hosts: when they put every rank on one. Without: switch, ring and
  // hypercube are one host (as make_topology groups them), hier:K is when
  // K >= N, and a JSON topology is not.
  bool one_host() const;

 protected:
  Topology(std::string name, int nranks, std::vector<LinkParams> classes, size_t links)
      : name_(std::move(name)), nranks_(nranks), classes_(std::move(classes)), links_(links) {}
  // one_host() and rank_hosts() of the topology without hosts.
  virtual bool one_host_without_hosts() const { return false; }
  virtual std::vector<int> layout_without_hosts() const { return {}; }
  std::vector<int> one_host_layout() const;  // every rank on host 0

 private:
  std::string name_;
  int nranks_;
  std::vector<LinkParams> classes_;
  size_t links_;
  std::vector<int> host_of_;
  std::vector<HostParams> hosts_;
};

// Builds a topology from its name (see above) for `nranks` ranks. `link` is the
// link class of switch, ring and hypercube and the intra-host class of hier:K;
// `inter` is hier:K's inter-host class. A JSON file brings its own classes and
// must have exactly `nranks` nodes. Bad names and files throw
// Error(invalid_argument).
std::unique_ptr<Topology> make_topology(std::string_view spec, int nranks, const LinkParams& link,
                                        const LinkParams& inter, const HostParams& host = {});

// hier:K with any layout, named "hosts": rank r on host host_of[r] (equal
// numbers share a host); hops inside a host take `intra`, hops across take
// `inter` and occupy both hosts' interfaces. `host`, when set, gives every
// host the machine model's memory and cores. What the tuner simulates for a
// communicator across hosts (tune/model_sim.h).
std::unique_ptr<Topology> make_host_topology(std::vector<int> host_of, const LinkParams& intra,
                                             const LinkParams& inter, const HostParams& host = {});

// The same from a JSON text (for tests); `name` labels it.
std::unique_ptr<Topology> topology_from_json(std::string_view json_text, std::string name,
                                             int nranks);

}  // namespace chorus
