// The transports by name: the one list that the configuration
// (CHORUS_TRANSPORT), init(), the bootstrap's choice, every Transport's
// name(), the tuner's link classes and the tools' flags share.
//
//   inproc   ranks are threads of one process; chorus::testing::run_ranks
//            (and chorus-perf --transport inproc, through it) starts them
//   shm      processes on one host, through shared memory
//   tcp      processes on any hosts, through TCP sockets
//   shm+tcp  the composite a job gets when some of its hosts run several
//            ranks: shm within a host, tcp across; the bootstrap chooses it,
//            nobody asks for it
//
// A process of a multi-process job (CHORUS_TRANSPORT, InitOptions::transport,
// chorus-run --transport) may ask for shm or tcp only: an inproc rank is a
// thread, which only the program that starts the threads can create, and
// the composite follows from where the ranks run.
//
//   parse_transport_kind("tcp")                         -> TransportKind::tcp
//   transport_names(process_transports())               -> "shm, tcp"
//   link_class(TransportKind::shm_tcp)                  -> "tcp"
//   parse_process_transport("inproc", "CHORUS_TRANSPORT='inproc'")  -> throws, saying why
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace chorus {

enum class TransportKind {
  inproc,
  shm,
  tcp,
  shm_tcp,  // the composite: "shm+tcp"
};

// "inproc", "shm", "tcp", "shm+tcp".
std::string_view to_string(TransportKind kind);
// The kind named `name` (any of the four names above), or nullopt.
std::optional<TransportKind> parse_transport_kind(std::string_view name);
// The kind named `name` when it is one of `among`, else nullopt.
std::optional<TransportKind> parse_transport_kind(std::string_view name,
                                                  std::span<const TransportKind> among);

// The kinds a user may name anywhere, in this order: inproc, shm, tcp.
std::span<const TransportKind> requestable_transports();
// The kinds a process of a multi-process job may ask for: shm, tcp.
std::span<const TransportKind> process_transports();

// The names of `kinds`, comma-separated ("shm, tcp"): the list an error
// message or a usage text gives.
std::string transport_names(std::span<const TransportKind> kinds);
// The names of `kinds`, one string each (for a command-line parser's check).
std::vector<std::string> transport_name_list(std::span<const TransportKind> kinds);

// The link class the tuner fits and looks up for a transport: its own name,
// except the composite, which is tuned for its slowest links ("tcp").
std::string_view link_class(TransportKind kind);

// What a process of a multi-process job asks for, checked: `value` must name
// one of process_transports(). Otherwise throws Error(invalid_argument)
// whose message begins with `subject` (e.g. "CHORUS_TRANSPORT='inproc'") and
// says why: the names it may be, and for inproc that its ranks are threads,
// which the program that runs them starts itself.
TransportKind parse_process_transport(std::string_view value, std::string_view subject);

}  // namespace chorus
