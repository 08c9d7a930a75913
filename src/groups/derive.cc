// Derived communicators: split, split_by_host and derive (groups/derive.h says
// the steps).
#include "groups/derive.h"

#include "bootstrap/bootstrap.h"
#include "core/check.h"
#include "core/first_seen.h"
#include "engine/call_site.h"
#include "engine/communicator_impl.h"
#include "net/socket.h"
#include "store/tcp_store.h"
#include "transport/forwarding_transport.h"
#include "transport/inproc/inproc_transport.h"
#include "transport/recovery_link.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <random>

namespace chorus::detail {
namespace {

// Step 1: what each rank of the parent says.
struct SplitEntry {
  int32_t color = 0;
  int32_t key = 0;
  char host[248] = {};  // the host identity, NUL-terminated
};

template <size_t N>
void put(char (&field)[N], std::string_view text, std::string_view what) {
  if (text.size() >= N)
    fail(ErrorCode::invalid_argument, what, " '", text, "' is longer than ", N - 1, " bytes");
  std::memcpy(field, text.data(), text.size());
  field[text.size()] = '\0';
}

template <size_t N>
std::string get(const char (&field)[N]) {
  return std::string(field, strnlen(field, N));
}

Outcome failed(const Error& e, std::string_view context) {
  Outcome out;
  out.ok = 0;
  out.code = static_cast<int32_t>(e.code());
  const std::string text = str_cat(context, e.what());
  const size_t n = std::min(text.size(), sizeof out.message - 1);
  std::memcpy(out.message, text.data(), n);
  return out;
}

// The worlds of derived in-process communicators, by token, while their
// members join them; each with the directory of its recovery links.
class InprocWorlds {
 public:
  struct Entry {
    std::shared_ptr<InprocWorld> world;
    std::shared_ptr<RecoveryDirectory> directory;
    int unclaimed = 0;  // members that have not joined (claim) yet
  };
  uint64_t add(std::shared_ptr<InprocWorld> world, int members) {
    std::lock_guard lock(mu_);
    auto directory = std::make_shared<RecoveryDirectory>(members, random_recovery_token());
    worlds_.emplace(++last_, Entry{std::move(world), std::move(directory), members});
    return last_;
  }
  // A member joins; the last one to join takes the entry out.
  Entry claim(uint64_t token) {
    std::lock_guard lock(mu_);
    auto it = worlds_.find(token);
    if (it == worlds_.end()) return {};
    Entry out = it->second;
    if (--it->second.unclaimed == 0) worlds_.erase(it);
    return out;
  }
  void remove(uint64_t token) {
    std::lock_guard lock(mu_);
    worlds_.erase(token);
  }

 private:
  std::mutex mu_;
  std::map<uint64_t, Entry> worlds_;
  uint64_t last_ = 0;
};

InprocWorlds& inproc_worlds() {
  static InprocWorlds worlds;
  return worlds;
}

// A member of a derived in-process world: its peers learn that it left when
// its communicator goes, as run_ranks tells them when a thread returns.
class InprocMember final : public ForwardingTransport {
 public:
  InprocMember(std::shared_ptr<InprocWorld> world, int rank, std::chrono::microseconds spin)
      : ForwardingTransport(make_inproc_transport(world, rank, spin)),
        world_(std::move(world)),
        rank_(rank) {}
  ~InprocMember() override {
    destroy_inner();
    inproc_rank_exited(*world_, rank_);
  }

 private:
  std::shared_ptr<InprocWorld> world_;
  int rank_;
};

std::string random_secret() {
  std::random_device device;
  std::string out;
  for (int i = 0; i < 4; ++i) {
    const uint64_t word = (uint64_t{device()} << 32) | device();
    out += str_cat(std::hex, word);
  }
  return out;
}

}  // namespace

SetupPoint::~SetupPoint() {
  if (world != 0) inproc_worlds().remove(world);
}

Invitation open_setup(CommunicatorImpl& parent, int members, SetupPoint& point,
                      const std::string& at) {
  Invitation inv;
  std::unique_ptr<TcpStoreServer>& server = point.server;
  uint64_t& world = point.world;
  try {
    if (parent.transport().kind() == TransportKind::inproc) {
      world = inproc_worlds().add(make_inproc_world(members), members);
      inv.inproc = 1;
      inv.token = world;
      return inv;
    }
    std::string address = at.empty() ? parent.transport().address() : at;
    if (address.empty()) address = parent.config().tcp_address;
    if (address.empty()) address = "127.0.0.1";
    const std::string secret = random_secret();
    server = std::make_unique<TcpStoreServer>(
        resolve(address, 0, "the set-up address of a derived communicator"), secret,
        parent.config().log_level);
    inv.port = server->port();
    put(inv.address, address, "address");
    put(inv.secret, secret, "secret");
  } catch (const Error& e) {
    inv.opened = failed(e, str_cat("rank ", parent.rank(), " could not open the set-up: "));
  }
  return inv;
}

std::unique_ptr<Transport> join_setup(const Invitation& inv, int rank, int size,
                                      const Config& config, Deadline deadline) {
  if (inv.inproc) {
    InprocWorlds::Entry entry = inproc_worlds().claim(inv.token);
    CHORUS_CHECK(entry.world != nullptr);
    auto transport = std::make_unique<InprocMember>(std::move(entry.world), rank, config.spin);
    transport->set_recovery_link(
        std::make_shared<RecoveryLink>(rank, std::move(entry.directory), "127.0.0.1"));
    return transport;
  }
  const std::string address = get(inv.address);
  TcpStore store(resolve(address, static_cast<uint16_t>(inv.port), "the derived set-up store"),
                 deadline, get(inv.secret));
  return bootstrap_over_store(store, address, rank, size, config, deadline);
}

Communicator derive(Communicator& parent_comm, const std::vector<int>& members,
                    std::chrono::milliseconds timeout) {
  CommunicatorImpl& parent = impl_of(parent_comm);
  const CallSite where{parent.rank(), "derive"};
  const int n = static_cast<int>(members.size());
  std::vector<int> sorted = members;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty() || sorted.front() < 0 || sorted.back() >= parent.size())
    fail(ErrorCode::invalid_argument, where, "members must be ranks in [0, ", parent.size(), ")");
  if (timeout.count() < 0) fail(ErrorCode::invalid_argument, where, "negative timeout");
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    fail(ErrorCode::invalid_argument, where, "rank ",
         *std::adjacent_find(sorted.begin(), sorted.end()), " is named twice");
  const auto self = std::find(members.begin(), members.end(), parent.rank());
  if (self == members.end())
    fail(ErrorCode::invalid_argument, where, "this rank is not among the members");
  const int me = static_cast<int>(self - members.begin());
  const int leader = members.front();
  const Config& config = parent.config();
  const Deadline deadline = deadline_after(config.timeout);

  // Step 2. The leader's store (or world) stays open until the verdict, when
  // every member has finished with it.
  SetupPoint point;
  Invitation inv;
  if (me == 0) {
    inv = open_setup(parent, n, point);
    for (int i = 1; i < n; ++i) parent.setup_message(OpKind::send, &inv, sizeof inv, members[i]);
  } else {
    parent.setup_message(OpKind::recv, &inv, sizeof inv, leader);
  }
  if (!inv.opened.ok) fail(static_cast<ErrorCode>(inv.opened.code), get(inv.opened.message));

  // Step 3.
  std::unique_ptr<Transport> transport;
  std::exception_ptr own_error;
  Outcome mine;
  try {
    transport = join_setup(inv, me, n, config, deadline);
  } catch (const Error& e) {
    own_error = std::current_exception();
    mine = failed(e, str_cat("rank ", parent.rank(), " (rank ", me, " of the new communicator): "));
  }

  // Step 4.
  Outcome verdict = mine;
  if (me == 0) {
    for (int i = 1; i < n; ++i) {
      Outcome theirs;
      parent.setup_message(OpKind::recv, &theirs, sizeof theirs, members[i]);
      if (verdict.ok && !theirs.ok) verdict = theirs;
    }
    for (int i = 1; i < n; ++i)
      parent.setup_message(OpKind::send, &verdict, sizeof verdict, members[i]);
  } else {
    parent.setup_message(OpKind::send, &mine, sizeof mine, leader);
    parent.setup_message(OpKind::recv, &verdict, sizeof verdict, leader);
  }
  if (own_error) std::rethrow_exception(own_error);
  if (!verdict.ok) fail(static_cast<ErrorCode>(verdict.code), get(verdict.message));
  Config child = config;
  child.derived = true;
  if (timeout.count() > 0) child.timeout = timeout;
  // The members' hosts, as the parent knows them (threads that play hosts
  // included).
  if (const auto& hosts = parent.host_of()) {
    std::vector<int> of_members;
    for (int m : members) of_members.push_back((*hosts)[static_cast<size_t>(m)]);
    transport->set_host_layout(number_by_first_seen(std::span<const int>(of_members)));
  }
  return make_communicator(std::move(transport), std::move(child));
}

std::optional<Communicator> split(Communicator& parent_comm, int color, int key, bool by_host) {
  CommunicatorImpl& parent = impl_of(parent_comm);
  SplitEntry mine;
  mine.color = color;
  mine.key = key;
  const std::string host =
      parent.config().host_id.empty() ? host_identity() : parent.config().host_id;
  put(mine.host, host, "host identity");
  std::vector<SplitEntry> all(static_cast<size_t>(parent.size()));
  parent.setup_allgather(&mine, all.data(), sizeof mine);
  if (by_host) {
    // A host's color: its first rank.
    for (auto& entry : all) {
      const auto first = std::find_if(all.begin(), all.end(), [&](const SplitEntry& e) {
        return std::strncmp(e.host, entry.host, sizeof e.host) == 0;
      });
      entry.color = static_cast<int32_t>(first - all.begin());
    }
    color = all[static_cast<size_t>(parent.rank())].color;
  }
  if (color < 0) return std::nullopt;
  std::vector<int> members;
  for (int r = 0; r < parent.size(); ++r)
    if (all[static_cast<size_t>(r)].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;
  });
  return derive(parent_comm, members);
}

}  // namespace chorus::detail
