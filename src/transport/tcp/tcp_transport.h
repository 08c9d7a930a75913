// The tcp transport: ranks on any hosts, over non-blocking TCP sockets.
//
// Set-up (through the Store): every rank listens on an ephemeral port of the
// address it publishes (TcpOptions::address, never 0.0.0.0) and publishes
// "tcp/addr/<rank>" = host id, address, port; rank 0 publishes a random job
// token under "tcp/token" (so whoever can read the store can read the token:
// a tcp:// store admits only holders of CHORUS_STORE_SECRET). Every rank
// reads and checks what it needs from the store, then meets the others at a
// store barrier ("tcp/checked"), so that a bad value found by one rank fails
// them all (bootstrap aborts the store) before anyone waits for connections.
// Rank r connects `streams` sockets to every peer p < r, at the address p
// published, and accepts them from every p > r. Each connection opens
// with a handshake that both ends send: magic, protocol version, token, rank,
// world size and stream index. A connection with a wrong token or an
// unexpected rank is closed and logged, and the set-up goes on waiting for the
// right one.
//
// Data path: length-prefixed frames, each with a 64-byte validated header
// (tcp_wire.h has its bytes: kind, seq, total, offset, len and the sending
// call's stamp). Kind data carries bytes [offset, offset+len) of message
// `seq` (per ordered pair, counted from 0) of `total` bytes; with several
// streams per peer a message is cut into chunks spread round-robin over the
// streams, so the receiver matches chunks to receives by seq, not by arrival
// order. kind abort
// carries the reason of a peer that failed; kind bye says the peer closed its
// communicator on purpose. An EOF without a bye means the peer died: every
// rank raises peer_failure at once, whatever it was waiting for.
//
// Receives are matched FIFO per peer. A chunk whose receive is not posted yet
// stays in the kernel (the stream is parked: TCP flow control holds the
// sender back) instead of being buffered here. Plain receives read straight
// into the destination; reducing receives read into a bounded staging slice
// per stream and reduce it into the destination as it arrives.
//
// Progress happens only inside poll() and wait_some() (epoll, level
// triggered), never in a thread of its own. Every socket is read and written
// in the same loop, so a large send never starves receives and two ranks
// sending large messages to each other cannot deadlock.
//
// Files: tcp_wire.* (the handshake and frame header bytes), tcp_setup.* (the
// connections), tcp_transport_impl.h (the class of the data path) and the
// files of its parts: tcp_transport.cc (construction and closing),
// tcp_send.cc, tcp_receive.cc, tcp_control.cc (control frames and
// failures), tcp_progress.cc (the epoll loop).
#pragma once

#include "core/config.h"
#include "store/store.h"
#include "transport/transport.h"

#include <chrono>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

struct TcpOptions {
  // Sockets per peer (>= 1). Messages larger than one chunk are striped.
  size_t streams = 1;
  // Address this rank listens on and peers reach it at; "" = 127.0.0.1. It
  // must be an address of this host.
  std::string address;
  // Identity of this host, published beside the address.
  std::string host_id;
  // Which peers to connect to (size() entries); empty = all. The composite
  // transport leaves out the peers it reaches over shared memory.
  std::vector<bool> peers;
  // Bounded spin before blocking in epoll (yields the CPU while spinning).
  std::chrono::microseconds spin{50};
  // Failures and refused connections are logged at warn.
  LogLevel log_level = LogLevel::warn;
  // Deadline of the set-up: address exchange and every connection.
  Deadline deadline = Clock::now() + std::chrono::seconds(300);
};

// Connects rank `rank` of `size` to its peers through `store` (keys under
// "tcp/"); returns once every connection is established and verified.
std::unique_ptr<Transport> make_tcp_transport(Store& store, int rank, int size,
                                              const TcpOptions& options);

}  // namespace chorus
