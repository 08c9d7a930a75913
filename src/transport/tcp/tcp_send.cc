// The tcp transport's send side: a message becomes one frame, or chunks
// striped over the peer's streams, queued per stream and written as the
// kernel takes them (the rest at the next progress pass).
#include "transport/tcp/tcp_transport_impl.h"

#include "core/check.h"
#include "net/socket.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <algorithm>
#include <cerrno>

namespace chorus::tcp {

RequestId TcpTransport::isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) {
  Peer& p = usable_peer(peer, "send to");
  const RequestId id = next_id_++;
  const size_t nstreams = p.streams.size();
  // One frame per message on a single stream; stripes of kChunkBytes over
  // several streams, so that each stream carries a share of a large message.
  const size_t chunk =
      nstreams == 1 || bytes <= kChunkBytes ? std::max<size_t>(bytes, 1) : kChunkBytes;
  const size_t nchunks = bytes == 0 ? 1 : (bytes + chunk - 1) / chunk;
  const uint64_t seq = p.send_seq++;
  sends_left_[id] = nchunks;
  ++p.sends_in_flight;
  for (size_t c = 0; c < nchunks; ++c) {
    Stream& s = *p.streams[p.next_stream++ % nstreams];
    OutChunk& oc = s.out.emplace_back();
    oc.send = id;
    FrameHeader h;
    h.seq = seq;
    h.total = bytes;
    h.offset = c * chunk;
    h.len = std::min(chunk, bytes - std::min(bytes, c * chunk));
    h.stamp = stamp;
    h.encode(oc.header);
    oc.data = static_cast<const uint8_t*>(data) + h.offset;
    oc.len = h.len;
  }
  // Eager: hand what the kernel takes now; the rest goes out in progress().
  for (Stream* s : p.streams) write_stream(*s);
  return id;
}

void TcpTransport::complete_send_chunk(RequestId id, int peer) {
  auto it = sends_left_.find(id);
  if (--it->second == 0) {
    sends_left_.erase(it);
    --peers_[static_cast<size_t>(peer)].sends_in_flight;
    completed_.push_back(id);
  }
}

void TcpTransport::write_stream(Stream& s) {
  while (!s.out.empty() && !s.closed) {
    OutChunk& c = s.out.front();
    iovec iov[2];
    int cnt = 0;
    if (c.written < kHeaderBytes) iov[cnt++] = {c.header + c.written, kHeaderBytes - c.written};
    const size_t data_done = c.written > kHeaderBytes ? c.written - kHeaderBytes : 0;
    if (c.len > data_done)
      iov[cnt++] = {const_cast<uint8_t*>(c.data) + data_done, c.len - data_done};
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<size_t>(cnt);
    const ssize_t n = ::sendmsg(s.fd.get(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      stream_error(s, errno_text(errno));
      return;
    }
    c.written += static_cast<size_t>(n);
    if (c.written == kHeaderBytes + c.len) {
      const RequestId id = c.send;
      s.out.pop_front();
      if (id != 0) complete_send_chunk(id, s.peer);
    }
  }
  update_events(s);
}

void TcpTransport::queue_control(Stream& s, const FrameHeader& h) {
  if (s.closed) return;
  OutChunk& oc = s.out.emplace_back();
  h.encode(oc.header);
  write_stream(s);
}

}  // namespace chorus::tcp
