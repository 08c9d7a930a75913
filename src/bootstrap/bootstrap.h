// Bootstrap: from (rank, size, store URL) to a connected Transport, which
// api/init.cc turns into a Communicator.
//
//   1. open_store() opens the store the URL names; with tcp:// rank 0 also
//      hosts the TcpStoreServer.
//   2. The process claims its rank ("chorus/rank<r>/owner": a second process
//      claiming it fails as "rank r joined twice"), and each communicator
//      takes a key space of its own ("chorus/comm<k>/" for this process's
//      k-th, counted per rank), so several communicators can share one
//      store. Rank 0 publishes the world size; every other rank compares its
//      own ("rank 2 says world size 4, rank 0 says 3").
//   3. Every rank publishes its host identity (host_identity(), below, or
//      CHORUS_HOST_ID); ranks with the same identity share memory.
//   4. The transport: shm among ranks of one host, tcp between hosts, a
//      composite routing each peer to one of them when a job has both, or
//      the one CHORUS_TRANSPORT forces.
//   5. A store barrier: no rank leaves (nor stops serving the store) before
//      every rank has finished its set-up.
//
// Steps 2 to 5 need only a Store: bootstrap_over_store() runs them over one
// that is already open, whoever opened it: bootstrap_transport() over its own
// (step 1), the torch backend (python/) over torch's c10d store.
//
// A rank whose start-up fails (a bad value in the store, a duplicate rank, a
// timeout, ...) aborts the store with its error before it throws (Store::abort),
// so that every other rank fails at once with that reason instead of waiting
// for it until the deadline.
#pragma once

#include "core/config.h"
#include "core/transport_kind.h"
#include "store/store.h"
#include "store/tcp_store.h"
#include "transport/transport.h"

#include <memory>
#include <optional>
#include <string>

namespace chorus {

// An open store: what open_store() hands back.
struct OpenedStore {
  std::shared_ptr<Store> store;
  std::unique_ptr<TcpStoreServer> server;  // set on the rank that hosts it
  std::string host;                        // tcp: the server's host; "" for a file store
};

// Opens "file:///dir" or "tcp://host:port" (parse_store_url in store_url.h). With tcp,
// `host_server` makes this process serve the store at host:port first, and config.store_secret is
// the secret the server requires and the client proves (the server warns once, at config.log_level,
// when there is none). Throws Error(invalid_argument) for a malformed URL (naming it).
OpenedStore open_store(const std::string& url, bool host_server, Deadline deadline,
                       const Config& config = {});

// Who this process is, for telling two processes apart: pid, host name, boot
// id and the process's start time (so a reused pid is another process).
std::string process_identity();

// "hostname/boot-id/shm=M:m/pidns=I": equal for two processes exactly when
// they can share memory as the shm transport does: the same booted machine,
// the same /dev/shm file system (device M:m; a container or a testbed host
// with a private /dev/shm has its own) and the same pid namespace (inode I;
// peers are watched through their pids). The hostname comes first so that
// messages name the host readably; two network namespaces alone do not
// make two hosts (they share /dev/shm and can share memory).
//   host_identity() -> "node7/0e5c...-9b1d/shm=0:27/pidns=4026531836"
std::string host_identity();

// Builds the transport of `rank` over `store` (a key space of this
// communicator), choosing per peer as described above. `transport` forces
// one of process_transports() (core/transport_kind.h); unset, the ranks'
// hosts decide.
std::unique_ptr<Transport> connect_transport(Store& store, int rank, int size,
                                             std::optional<TransportKind> transport,
                                             const Config& config, const std::string& tcp_address,
                                             Deadline deadline);

// Steps 2 to 5 for one rank of a job over `store`, which every rank reaches
// (the same store, or a prefix of it that is the same on every rank). The
// transport comes back connected; it does not hold `store`, which is needed
// no longer. `store_host` is the host that serves the store ("" where none
// does, as for a file store): the address published to tcp peers is the one
// that routes towards it, unless config.tcp_address names one (else
// 127.0.0.1). config.transport forces a transport (unset = automatic). A failure
// aborts `store` with the error, worded "rank R: ...", and throws it so.
//   auto t = bootstrap_over_store(store, "", rank, size, config, deadline_after(60s));
std::unique_ptr<Transport> bootstrap_over_store(Store& store, const std::string& store_host,
                                                int rank, int size, const Config& config,
                                                Deadline deadline);

// Steps 1 to 5 for one rank of a job: every rank calls it with the same store
// URL and size. The transport comes back connected and owns the store it was
// made through (with, on rank 0 of a tcp:// store, the store server, which
// peers may still be using), so that they live exactly as long as it.
// config.transport forces a transport (unset = automatic); config.tcp_address is
// the address published to tcp peers ("" = the one that routes to a tcp://
// store's host, else 127.0.0.1).
std::unique_ptr<Transport> bootstrap_transport(const std::string& store_url, int rank, int size,
                                               const Config& config, Deadline deadline);

}  // namespace chorus
