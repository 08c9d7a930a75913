// Set-up of the tcp transport's connections, through the Store: listen,
// publish the address, agree on the job token, connect to the lower ranks,
// accept the higher ones, and check each connection's handshake
// (tcp_transport.h describes the protocol, tcp_wire.h the bytes).
#pragma once

#include "core/fd.h"
#include "store/store.h"
#include "transport/tcp/tcp_transport.h"

#include <cstdint>
#include <functional>

namespace chorus::tcp {

// Whether this rank connects to `peer` at all (TcpOptions::peers).
bool connects_to(const TcpOptions& options, int peer);

// Receives each connection once its handshake has been checked (and, for an
// accepted one, answered): its socket, non-blocking or not, the peer and the
// stream index at that peer.
using StreamReady = std::function<void(Fd fd, int peer, uint32_t stream)>;

// Connects rank `rank` of `size` with every peer it connects_to(), options.streams
// sockets each, handing every one to `ready` as it is established; returns
// once all are, with the listening socket, still open, so that the caller can
// refuse later connections instead of leaving them in the backlog. Throws
// Error(timeout) naming the missing peers at options.deadline, and
// Error(mismatch) when a connection this rank opened answers wrongly;
// wrong incoming connections are logged and refused.
Fd connect_mesh(Store& store, int rank, int size, const TcpOptions& options,
                const StreamReady& ready);

}  // namespace chorus::tcp
