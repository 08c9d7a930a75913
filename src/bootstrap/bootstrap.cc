#include "bootstrap/bootstrap.h"

#include "bootstrap/store_url.h"
#include "core/check.h"
#include "core/first_seen.h"
#include "core/log.h"
#include "net/socket.h"
#include "store/file_store.h"
#include "transport/composite/composite_transport.h"
#include "transport/forwarding_transport.h"
#include "transport/recovery_link.h"
#include "transport/shm/shm_transport.h"
#include "transport/tcp/tcp_transport.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace chorus {

namespace {

std::vector<uint8_t> to_bytes(const std::string& s) {
  return {s.begin(), s.end()};
}
std::string to_string(const std::vector<uint8_t>& b) {
  return {b.begin(), b.end()};
}

// Keeps what a communicator's transport depends on alive as long as it: the
// store (and, on the rank that hosts it, the store server, which peers may
// still be using while this rank already runs collectives).
class BootstrappedTransport final : public ForwardingTransport {
 public:
  BootstrappedTransport(std::unique_ptr<Transport> inner, OpenedStore store)
      : ForwardingTransport(std::move(inner)), store_(std::move(store)) {}
  ~BootstrappedTransport() override { destroy_inner(); }  // before store_

 private:
  OpenedStore store_;
};

// Every rank adds itself; the last one releases the others.
void store_barrier(Store& store, const std::string& name, int size, Deadline deadline) {
  if (store.add(name + "/arrived", 1) == size) store.set(name + "/open", {1});
  store.get(name + "/open", deadline);
}

// Claims `rank` for this process and counts this process's communicators on
// the store: returns k for its k-th (from 0). The first process to add to
// "claims" owns the rank; another one is a duplicate.
int64_t join(Store& store, int rank, Deadline deadline) {
  const std::string base = str_cat("chorus/rank", rank);
  const std::string me = process_identity();
  if (store.add(base + "/claims", 1) == 1) store.set(base + "/owner", to_bytes(me));
  const std::string owner = to_string(store.get(base + "/owner", deadline));
  if (owner != me)
    fail(ErrorCode::mismatch, "rank ", rank, " joined twice: ", owner, " and ", me,
         " both claim it (two processes were given the same rank, or the store holds the keys "
         "of an earlier job: use a fresh store per job)");
  return store.add(base + "/inits", 1) - 1;
}

// Rank 0 publishes the world size; every other rank compares its own.
void check_world_size(Store& scoped, const std::string& prefix, int rank, int size,
                      Deadline deadline) {
  if (rank == 0) {
    scoped.set("size", to_bytes(std::to_string(size)));
    return;
  }
  std::vector<uint8_t> v;
  try {
    v = scoped.get("size", deadline);
  } catch (const Error& e) {
    fail(e.code(), "rank ", rank, ": waiting for rank 0's world size: ", e.what());
  }
  int theirs = 0;
  const char* b = reinterpret_cast<const char*>(v.data());
  const auto [end, ec] = std::from_chars(b, b + v.size(), theirs);
  if (v.empty() || ec != std::errc() || end != b + v.size() || theirs < 1) {
    std::string shown;
    for (size_t i = 0; i < v.size() && i < 64; ++i)
      shown += v[i] >= 0x20 && v[i] < 0x7f ? static_cast<char>(v[i]) : '?';
    fail(ErrorCode::mismatch, "rank ", rank, ": store key '", prefix, "/size' holds '", shown,
         "', not a world size");
  }
  if (theirs != size)
    fail(ErrorCode::mismatch, "rank ", rank, " says world size ", size, ", rank 0 says ", theirs);
}

// A rank whose start-up failed has told the others through the store
// (bootstrap_over_store aborts it), so that they fail now, with its reason,
// instead of waiting for it until the deadline. The rank that hosts a tcp://
// store then keeps serving it until every rank has been told (each rank's one
// connection) and has left, for at most kAbortLinger: a rank that starts late
// still reads the reason.
constexpr auto kAbortLinger = std::chrono::seconds(10);

void linger_after_abort(OpenedStore& opened, int size, Deadline deadline) {
  if (!opened.server) return;
  opened.store.reset();  // this rank's own connection
  opened.server->wait_until_told(static_cast<size_t>(size),
                                 std::min(deadline, Clock::now() + kAbortLinger));
}

}  // namespace

std::string process_identity() {
  // Field 22 of /proc/self/stat: the start time in clock ticks since boot.
  std::string start = "?";
  std::ifstream f("/proc/self/stat");
  std::string stat((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');
  if (paren != std::string::npos) {
    std::istringstream fields(stat.substr(paren + 2));
    std::string field;
    for (int i = 3; i <= 22 && fields >> field; ++i)
      if (i == 22) start = field;
  }
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream b("/proc/sys/kernel/random/boot_id");
  std::getline(b, boot);
  return str_cat("process ", ::getpid(), " on ", name, " (boot ", boot, ", started at tick ", start,
                 ")");
}

OpenedStore open_store(const std::string& url, bool host_server, Deadline deadline,
                       const Config& config) {
  const StoreUrl parsed = parse_store_url(url);
  OpenedStore out;
  if (parsed.kind == StoreUrl::Kind::file) {
    out.store = std::make_shared<FileStore>(parsed.path);
    return out;
  }
  const Endpoint ep = resolve(parsed.host, parsed.port, str_cat("store URL '", url, "'"));
  if (host_server) {
    try {
      out.server = std::make_unique<TcpStoreServer>(ep, config.store_secret, config.log_level);
    } catch (const Error& e) {
      fail(e.code(), e.what(),
           " (does another process, perhaps another rank 0 of this job, use the port?)");
    }
    if (config.store_secret.empty())
      log_message(config.log_level, LogLevel::warn, 0, "TcpStore at ", ep.describe(),
                  " has no secret: any process that can reach it may read and change the "
                  "job's keys, the tcp transport's job token among them; give every rank the "
                  "same CHORUS_STORE_SECRET (chorus-run does)");
  }
  out.store = std::make_shared<TcpStore>(ep, deadline, config.store_secret);
  out.host = parsed.host;
  return out;
}

std::string host_identity() {
  char name[256] = {};
  ::gethostname(name, sizeof name - 1);
  std::string boot;
  std::ifstream f("/proc/sys/kernel/random/boot_id");
  std::getline(f, boot);
  // The shm transport's segments are names in the file system at /dev/shm,
  // so a process with a /dev/shm of its own (a container, a testbed host)
  // cannot open another's: the file system's device number tells them apart.
  std::string shm = "none";
  struct stat st {};
  if (::stat("/dev/shm", &st) == 0) shm = str_cat(major(st.st_dev), ":", minor(st.st_dev));
  // Peers watch each other through pidfds (and may read each other with
  // process_vm_readv): a pid means the same process only within one pid
  // namespace.
  std::string pid_ns = "none";
  if (::stat("/proc/self/ns/pid", &st) == 0) pid_ns = std::to_string(st.st_ino);
  return str_cat(name, "/", boot, "/shm=", shm, "/pidns=", pid_ns);
}

std::unique_ptr<Transport> connect_transport(Store& store, int rank, int size,
                                             std::optional<TransportKind> transport,
                                             const Config& config, const std::string& tcp_address,
                                             Deadline deadline) {
  const std::string me = config.host_id.empty() ? host_identity() : config.host_id;
  store.set(str_cat("host/", rank), to_bytes(me));
  std::vector<std::string> hosts(static_cast<size_t>(size));
  for (int r = 0; r < size; ++r)
    hosts[static_cast<size_t>(r)] = to_string(store.get(str_cat("host/", r), deadline));
  // The shm group: the ranks of this host, numbered in global rank order.
  std::vector<int> local(static_cast<size_t>(size), -1);
  int group = 0;
  int my_local = -1;
  for (int r = 0; r < size; ++r)
    if (hosts[static_cast<size_t>(r)] == me) {
      if (r == rank) my_local = group;
      local[static_cast<size_t>(r)] = group++;
    }
  const bool all_local = group == size;
  // Every rank's host, numbered in order of first rank (Transport::host_layout).
  const std::vector<int> host_of = number_by_first_seen(std::span<const std::string>(hosts));
  auto laid_out = [&](std::unique_ptr<Transport> t) {
    t->set_host_layout(host_of);
    return t;
  };

  TcpOptions tcp;
  tcp.streams = tcp_streams_for(config, size);
  tcp.address = tcp_address;
  tcp.host_id = me;
  tcp.spin = config.spin;
  tcp.deadline = deadline;
  tcp.log_level = config.log_level;
  ShmOptions shm;
  shm.spin = config.spin;
  shm.deadline = deadline;

  // Config and init() let a process ask for no other kind; a caller that
  // builds its own Config is told why here.
  if (transport)
    parse_process_transport(to_string(*transport),
                            str_cat("rank ", rank, ": transport ", to_string(*transport)));
  if (transport == TransportKind::shm && !all_local) {
    std::string other;
    for (int r = 0; r < size && other.empty(); ++r)
      if (hosts[static_cast<size_t>(r)] != me)
        other = str_cat("rank ", r, " runs on ", hosts[static_cast<size_t>(r)]);
    fail(ErrorCode::invalid_argument, "rank ", rank, ": transport shm was forced but ", other,
         ", not on this host (", me, ")");
  }
  const TransportKind kind = transport    ? *transport
                             : all_local  ? TransportKind::shm
                             : group == 1 ? TransportKind::tcp
                                          : TransportKind::shm_tcp;
  log_message(config.log_level, LogLevel::info, rank, "transport ", to_string(kind), " (", group,
              " of ", size, " ranks on this host)");
  if (kind == TransportKind::shm) {
    PrefixStore shm_store(std::shared_ptr<Store>(&store, [](Store*) {}), "shm");
    return laid_out(make_shm_transport(shm_store, rank, size, shm));
  }
  if (kind == TransportKind::tcp) {
    PrefixStore tcp_store(std::shared_ptr<Store>(&store, [](Store*) {}), "net");
    return laid_out(make_tcp_transport(tcp_store, rank, size, tcp));
  }
  // Mixed: shm inside this host's group (a key space per host), tcp to the rest.
  PrefixStore shm_store(std::shared_ptr<Store>(&store, [](Store*) {}), "shm/" + me);
  auto shm_t = group > 1 ? make_shm_transport(shm_store, my_local, group, shm) : nullptr;
  tcp.peers.assign(static_cast<size_t>(size), false);
  for (int r = 0; r < size; ++r)
    tcp.peers[static_cast<size_t>(r)] = local[static_cast<size_t>(r)] < 0;
  PrefixStore tcp_store(std::shared_ptr<Store>(&store, [](Store*) {}), "net");
  auto tcp_t = make_tcp_transport(tcp_store, rank, size, tcp);
  if (!shm_t) return laid_out(std::move(tcp_t));
  local[static_cast<size_t>(rank)] = -1;
  return laid_out(
      make_composite_transport(rank, size, std::move(shm_t), std::move(local), std::move(tcp_t)));
}

std::unique_ptr<Transport> bootstrap_over_store(Store& store, const std::string& store_host,
                                                int rank, int size, const Config& config,
                                                Deadline deadline) {
  try {
    const std::string prefix = str_cat("chorus/comm", join(store, rank, deadline));
    PrefixStore scoped(std::shared_ptr<Store>(&store, [](Store*) {}), prefix);
    check_world_size(scoped, prefix, rank, size, deadline);
    std::string address = config.tcp_address;
    if (address.empty() && !store_host.empty())
      address = local_address_towards(resolve(store_host, 0, "store host"));
    // The recovery link (transport/recovery_link.h): rank 0's token and each
    // rank's place, published before the barrier and read after it.
    if (rank == 0) scoped.set("recover/token", to_bytes(std::to_string(random_recovery_token())));
    auto transport =
        connect_transport(scoped, rank, size, config.transport, config, address, deadline);
    // After the transport, which has checked the address (CHORUS_TCP_ADDR).
    const std::string token_text = to_string(scoped.get("recover/token", deadline));
    uint64_t token = 0;
    const auto [token_end, token_ec] =
        std::from_chars(token_text.data(), token_text.data() + token_text.size(), token);
    if (token_ec != std::errc() || token_end != token_text.data() + token_text.size())
      fail(ErrorCode::mismatch, "rank ", rank, ": store key '", prefix,
           "/recover/token' holds no token");
    auto directory = std::make_shared<RecoveryDirectory>(size, token);
    auto link = std::make_shared<RecoveryLink>(rank, directory, address);
    scoped.set(str_cat("recover/", rank), to_bytes(link->place().describe()));
    // Nobody leaves (and the process serving the store cannot stop) before
    // every rank has finished its own set-up.
    store_barrier(scoped, "ready", size, deadline);
    for (int r = 0; r < size; ++r) {
      if (r == rank) continue;
      const auto [host, port] = split_host_port(
          to_string(scoped.get(str_cat("recover/", r), deadline)), "a recovery place");
      directory->set(r, resolve(host, port, "a recovery place"));
    }
    transport->set_recovery_link(std::move(link));
    return transport;
  } catch (const Error& e) {
    std::string reason = e.what();
    if (reason.rfind("rank ", 0) != 0) reason = str_cat("rank ", rank, ": ", reason);
    try {
      store.abort(reason);
    } catch (const Error&) {
      // The store itself may be what failed; the others will time out.
    }
    throw Error(e.code(), reason);
  }
}

std::unique_ptr<Transport> bootstrap_transport(const std::string& store_url, int rank, int size,
                                               const Config& config, Deadline deadline) {
  OpenedStore opened = open_store(store_url, rank == 0, deadline, config);
  try {
    auto transport = bootstrap_over_store(*opened.store, opened.host, rank, size, config, deadline);
    return std::make_unique<BootstrappedTransport>(std::move(transport), std::move(opened));
  } catch (const Error&) {
    linger_after_abort(opened, size, deadline);
    throw;
  }
}

}  // namespace chorus
