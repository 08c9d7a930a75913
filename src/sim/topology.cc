#include "sim/topology.h"

#include "core/check.h"
#include "model/units.h"
#include "schedule/rank_math.h"

#include <nlohmann/json.hpp>

#include <charconv>
#include <deque>
#include <fstream>
#include <sstream>

namespace chorus {
namespace {

class SwitchTopology final : public Topology {
 public:
  SwitchTopology(int n, const LinkParams& link) : Topology("switch", n, {link}, 0) {}
  bool single_hop() const override { return true; }
  bool one_host_without_hosts() const override { return true; }
  std::vector<int> layout_without_hosts() const override { return one_host_layout(); }
  void route(int a, int b, std::vector<Hop>& hops) const override {
    hops.push_back({a, b, 0, {kNoLink, kNoLink}});
  }
};

// Directed link ids: 2r is r -> r+1, 2r+1 is r -> r-1.
class RingTopology final : public Topology {
 public:
  RingTopology(int n, const LinkParams& link)
      : Topology("ring", n, {link}, 2 * static_cast<size_t>(n)) {}
  bool single_hop() const override { return nranks() <= 3; }
  bool one_host_without_hosts() const override { return true; }
  std::vector<int> layout_without_hosts() const override { return one_host_layout(); }
  void route(int a, int b, std::vector<Hop>& hops) const override {
    const int n = nranks();
    const int forward = ring_add(b, -a, n);
    const bool right = forward <= n - forward;
    const int dist = right ? forward : n - forward;
    int at = a;
    for (int i = 0; i < dist; ++i) {
      const int next = ring_add(at, right ? 1 : -1, n);
      const auto id = static_cast<uint32_t>(2 * at + (right ? 0 : 1));
      hops.push_back({at, next, 0, {id, kNoLink}});
      at = next;
    }
  }
};

// Directed link ids: r * D + k is r -> r xor 2^k.
class HypercubeTopology final : public Topology {
 public:
  HypercubeTopology(int n, const LinkParams& link)
      : Topology("hypercube", n, {link},
                 static_cast<size_t>(n) * static_cast<size_t>(std::max(1, ceil_log2(n)))),
        dims_(std::max(1, ceil_log2(n))) {}
  bool one_host_without_hosts() const override { return true; }
  std::vector<int> layout_without_hosts() const override { return one_host_layout(); }
  void route(int a, int b, std::vector<Hop>& hops) const override {
    // Clearing bits only lowers the rank and setting bits of b keeps it <= b,
    // so every intermediate rank exists even when N is not a power of two.
    int at = a;
    const int clear = a & ~b;
    const int set = b & ~a;
    for (int pass = 0; pass < 2; ++pass) {
      const int bits = pass == 0 ? clear : set;
      for (int k = 0; k < dims_; ++k) {
        if (!(bits & (1 << k))) continue;
        const int next = at ^ (1 << k);
        hops.push_back({at, next, 0, {static_cast<uint32_t>(at * dims_ + k), kNoLink}});
        at = next;
      }
    }
  }

 private:
  int dims_;
};

// Link ids: 2h is host h's outgoing interface, 2h+1 its incoming one.
// hier:K groups consecutive ranks; make_host_topology any layout.
class HierTopology final : public Topology {
 public:
  HierTopology(std::string name, std::vector<int> host_of, const LinkParams& intra,
               const LinkParams& inter)
      : Topology(std::move(name), static_cast<int>(host_of.size()), {intra, inter},
                 2 * static_cast<size_t>(host_count_of(host_of))),
        layout_(std::move(host_of)) {}
  bool single_hop() const override { return true; }
  bool one_host_without_hosts() const override { return host_count_of(layout_) <= 1; }
  std::vector<int> layout_without_hosts() const override { return layout_; }
  void route(int a, int b, std::vector<Hop>& hops) const override {
    const int ha = layout_[static_cast<size_t>(a)];
    const int hb = layout_[static_cast<size_t>(b)];
    if (ha == hb) {
      hops.push_back({a, b, 0, {kNoLink, kNoLink}});
    } else {
      hops.push_back({a, b, 1, {static_cast<uint32_t>(2 * ha), static_cast<uint32_t>(2 * hb + 1)}});
    }
  }

 private:
  static int host_count_of(const std::vector<int>& host_of) {
    int hosts = 0;
    for (int h : host_of) hosts = std::max(hosts, h + 1);
    return hosts;
  }
  std::vector<int> layout_;  // host of each rank, numbered from 0
};

// Arbitrary graph: each directed link is its own class and resource; routes
// follow a next-hop table of shortest paths by hop count.
class GraphTopology final : public Topology {
 public:
  GraphTopology(std::string name, int n, std::vector<LinkParams> classes,
                std::vector<std::vector<std::pair<int, uint32_t>>> out)
      : Topology(std::move(name), n, classes, classes.size()), out_(std::move(out)) {
    // next_[a * n + b]: the link a takes towards b. BFS from every target over
    // reversed links gives each node its distance to the target; a node then
    // takes the lowest-numbered neighbour one step closer.
    const auto un = static_cast<size_t>(n);
    next_.assign(un * un, kNoLink);
    std::vector<std::vector<int>> in(un);
    for (int a = 0; a < n; ++a)
      for (auto [b, l] : out_[static_cast<size_t>(a)]) in[static_cast<size_t>(b)].push_back(a);
    std::vector<int> dist(un);
    for (int t = 0; t < n; ++t) {
      std::fill(dist.begin(), dist.end(), -1);
      dist[static_cast<size_t>(t)] = 0;
      std::deque<int> q{t};
      while (!q.empty()) {
        const int v = q.front();
        q.pop_front();
        for (int u : in[static_cast<size_t>(v)])
          if (dist[static_cast<size_t>(u)] < 0) {
            dist[static_cast<size_t>(u)] = dist[static_cast<size_t>(v)] + 1;
            q.push_back(u);
          }
      }
      for (int a = 0; a < n; ++a) {
        if (a == t || dist[static_cast<size_t>(a)] < 0) continue;
        int best = -1;
        uint32_t best_link = kNoLink;
        for (auto [b, l] : out_[static_cast<size_t>(a)])
          if (dist[static_cast<size_t>(b)] == dist[static_cast<size_t>(a)] - 1 &&
              (best < 0 || b < best)) {
            best = b;
            best_link = l;
          }
        next_[static_cast<size_t>(a) * un + static_cast<size_t>(t)] = best_link;
      }
    }
    targets_.resize(link_count());
    for (int a = 0; a < n; ++a)
      for (auto [b, l] : out_[static_cast<size_t>(a)]) targets_[l] = b;
  }

  void route(int a, int b, std::vector<Hop>& hops) const override {
    const auto un = static_cast<size_t>(nranks());
    int at = a;
    while (at != b) {
      const uint32_t l = next_[static_cast<size_t>(at) * un + static_cast<size_t>(b)];
      if (l == kNoLink)
        fail(ErrorCode::invalid_argument, "topology ", name(), ": no route from node ", a,
             " to node ", b);
      const int next = targets_[l];
      hops.push_back({at, next, l, {l, kNoLink}});
      at = next;
    }
  }

 private:
  std::vector<std::vector<std::pair<int, uint32_t>>> out_;
  std::vector<uint32_t> next_;
  std::vector<int> targets_;
};

// A JSON number (seconds, B/s) or a string with units.
double json_quantity(const nlohmann::json& v, bool is_time, const std::string& where) {
  if (v.is_number()) {
    const double x = v.get<double>();
    if (!(x >= 0) || (!is_time && !(x > 0)))
      fail(ErrorCode::invalid_argument, where, ": ", x, " is out of range");
    return x;
  }
  if (v.is_string())
    return is_time ? parse_time(v.get<std::string>(), where)
                   : parse_bandwidth(v.get<std::string>(), where);
  fail(ErrorCode::invalid_argument, where, ": expected a number or a string with units");
}

// Ranks [0, n) in hosts of k consecutive ranks.
void group_hosts(Topology& t, int k, const HostParams& host) {
  std::vector<int> host_of(static_cast<size_t>(t.nranks()));
  for (int r = 0; r < t.nranks(); ++r) host_of[static_cast<size_t>(r)] = r / k;
  t.set_hosts(std::move(host_of),
              std::vector<HostParams>(static_cast<size_t>((t.nranks() + k - 1) / k), host));
}

}  // namespace

void Topology::set_hosts(std::vector<int> host_of, std::vector<HostParams> hosts) {
  if (host_of.size() != static_cast<size_t>(nranks_))
    fail(ErrorCode::invalid_argument, "topology ", name_, ": hosts cover ", host_of.size(),
         " ranks, not ", nranks_);
  for (size_t r = 0; r < host_of.size(); ++r)
    if (host_of[r] < 0 || static_cast<size_t>(host_of[r]) >= hosts.size())
      fail(ErrorCode::invalid_argument, "topology ", name_, ": rank ", r, " is on host ",
           host_of[r], ", not one of the ", hosts.size(), " hosts");
  for (const HostParams& h : hosts)
    if (!(h.memory >= 0) || h.cores < 0)
      fail(ErrorCode::invalid_argument, "topology ", name_,
           ": a host's memory bandwidth and cores must be >= 0");
  host_of_ = std::move(host_of);
  hosts_ = std::move(hosts);
}

std::vector<int> Topology::rank_hosts() const {
  return has_hosts() ? host_of_ : layout_without_hosts();
}

std::vector<int> Topology::one_host_layout() const {
  return std::vector<int>(static_cast<size_t>(nranks_), 0);
}

bool Topology::one_host() const {
  if (!has_hosts()) return one_host_without_hosts();
  for (int h : host_of_)
    if (h != host_of_.front()) return false;
  return true;
}

std::unique_ptr<Topology> topology_from_json(std::string_view text, std::string name, int nranks) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail(ErrorCode::invalid_argument, "topology ", name, ": not valid JSON: ", e.what());
  }
  if (!j.is_object() || !j.contains("nodes") || !j["nodes"].is_number_integer() ||
      !j.contains("links") || !j["links"].is_array())
    fail(ErrorCode::invalid_argument, "topology ", name,
         ": expected {\"nodes\": N, \"links\": [{\"from\", \"to\", \"alpha\", \"beta\"}, ...]}");
  const long long nodes = j["nodes"].get<long long>();
  if (nodes != nranks)
    fail(ErrorCode::invalid_argument, "topology ", name, " has ", nodes, " nodes but ", nranks,
         " ranks are simulated");
  std::vector<LinkParams> classes;
  std::vector<std::vector<std::pair<int, uint32_t>>> out(static_cast<size_t>(nranks));
  size_t index = 0;
  for (const auto& l : j["links"]) {
    const std::string where = str_cat("topology ", name, ": link ", index++);
    if (!l.is_object() || !l.contains("from") || !l.contains("to") || !l.contains("alpha") ||
        !l.contains("beta") || !l["from"].is_number_integer() || !l["to"].is_number_integer())
      fail(ErrorCode::invalid_argument, where,
           ": needs integer \"from\", \"to\" and \"alpha\", \"beta\"");
    const long long a = l["from"].get<long long>();
    const long long b = l["to"].get<long long>();
    if (a < 0 || a >= nranks || b < 0 || b >= nranks || a == b)
      fail(ErrorCode::invalid_argument, where, ": endpoints ", a, " -> ", b,
           " must be distinct nodes in [0, ", nranks, ")");
    const double alpha = json_quantity(l["alpha"], true, where + " alpha");
    const double beta = json_quantity(l["beta"], false, where + " beta");
    const bool duplex = !l.contains("duplex") || l["duplex"].get<bool>();
    // The machine model's terms of a link (model/machine_model.h).
    const bool half =
        l.contains("half_duplex") && l["half_duplex"].is_boolean() && l["half_duplex"].get<bool>();
    double traffic = 0;
    if (l.contains("mem_traffic")) {
      if (!l["mem_traffic"].is_number() || !(l["mem_traffic"].get<double>() >= 0))
        fail(ErrorCode::invalid_argument, where, ": mem_traffic must be a number >= 0");
      traffic = l["mem_traffic"].get<double>();
    }
    auto add = [&](long long x, long long y) {
      const auto id = static_cast<uint32_t>(classes.size());
      LinkParams c{str_cat(x, "->", y), alpha, beta};
      c.half_duplex = half;
      if (l.contains("half_duplex_from") && l["half_duplex_from"].is_number())
        c.half_duplex_from = l["half_duplex_from"].get<double>();
      c.mem_traffic = traffic;
      classes.push_back(std::move(c));
      out[static_cast<size_t>(x)].emplace_back(static_cast<int>(y), id);
    };
    add(a, b);
    if (duplex) add(b, a);
  }
  auto topo =
      std::make_unique<GraphTopology>(std::move(name), nranks, std::move(classes), std::move(out));
  if (j.contains("hosts")) {
    const std::string where = str_cat("topology ", topo->name(), ": hosts");
    if (!j["hosts"].is_array())
      fail(ErrorCode::invalid_argument, where, " must be a list of lists of nodes");
    HostParams host;
    if (j.contains("memory")) host.memory = json_quantity(j["memory"], false, where + " memory");
    if (j.contains("cores")) {
      if (!j["cores"].is_number_integer() || j["cores"].get<long long>() < 1 ||
          j["cores"].get<long long>() > 1000000)
        fail(ErrorCode::invalid_argument, where, ": \"cores\" must be an integer from 1");
      host.cores = static_cast<int>(j["cores"].get<long long>());
    }
    std::vector<int> host_of(static_cast<size_t>(nranks), -1);
    int h = 0;
    for (const auto& members : j["hosts"]) {
      if (!members.is_array())
        fail(ErrorCode::invalid_argument, where, ": host ", h, " must be a list of nodes");
      for (const auto& m : members) {
        if (!m.is_number_integer() || m.get<long long>() < 0 || m.get<long long>() >= nranks ||
            host_of[static_cast<size_t>(m.get<long long>())] >= 0)
          fail(ErrorCode::invalid_argument, where, ": host ", h, " lists ", m.dump(),
               ", not a node in [0, ", nranks, ") that no other host has");
        host_of[static_cast<size_t>(m.get<long long>())] = h;
      }
      ++h;
    }
    topo->set_hosts(std::move(host_of), std::vector<HostParams>(static_cast<size_t>(h), host));
  }
  return topo;
}

std::unique_ptr<Topology> make_topology(std::string_view spec, int nranks, const LinkParams& link,
                                        const LinkParams& inter, const HostParams& host) {
  if (nranks < 1) fail(ErrorCode::invalid_argument, "topology: nranks must be >= 1, got ", nranks);
  const bool hosts = host != HostParams{};
  std::unique_ptr<Topology> t;
  if (spec == "switch") t = std::make_unique<SwitchTopology>(nranks, link);
  if (spec == "ring") t = std::make_unique<RingTopology>(nranks, link);
  if (spec == "hypercube") t = std::make_unique<HypercubeTopology>(nranks, link);
  if (t) {
    if (hosts) group_hosts(*t, nranks, host);
    return t;
  }
  if (spec.starts_with("hier:")) {
    const std::string_view k = spec.substr(5);
    int per_host = 0;
    auto [p, ec] = std::from_chars(k.data(), k.data() + k.size(), per_host);
    if (ec != std::errc{} || p != k.data() + k.size() || per_host < 1)
      fail(ErrorCode::invalid_argument, "topology '", spec,
           "': hier:K needs a positive integer K (ranks per host)");
    LinkParams intra = link;
    intra.name = "intra";
    LinkParams across = inter;
    across.name = "inter";
    t = std::make_unique<HierTopology>(std::string(spec), consecutive_hosts(nranks, per_host),
                                       intra, across);
    if (hosts) group_hosts(*t, per_host, host);
    return t;
  }
  if (spec.ends_with(".json")) {
    std::ifstream in{std::string(spec)};
    if (!in) fail(ErrorCode::invalid_argument, "topology file '", spec, "' cannot be opened");
    std::ostringstream text;
    text << in.rdbuf();
    return topology_from_json(text.str(), std::string(spec), nranks);
  }
  fail(ErrorCode::invalid_argument, "unknown topology '", spec,
       "' (use switch, ring, hypercube, hier:K or FILE.json)");
}

std::unique_ptr<Topology> make_host_topology(std::vector<int> host_of, const LinkParams& intra,
                                             const LinkParams& inter, const HostParams& host) {
  if (host_of.empty()) fail(ErrorCode::invalid_argument, "topology hosts: no ranks");
  const HostGroups g = host_groups(host_of);  // renumbers from 0; rejects negatives
  LinkParams in = intra;
  in.name = "intra";
  LinkParams across = inter;
  across.name = "inter";
  auto t = std::make_unique<HierTopology>("hosts", g.host, in, across);
  if (host != HostParams{})
    t->set_hosts(g.host, std::vector<HostParams>(static_cast<size_t>(g.host_count()), host));
  return t;
}

}  // namespace chorus
