// The tcp transport's implementation class, private to transport/tcp/: the
// per-stream and per-peer state and TcpTransport, the Transport over the
// connected sockets (tcp_transport.h describes the protocol). Its members
// are defined by section, one file each:
//   tcp_transport.cc  construction, registering the connections that
//                     tcp_setup.cc made, closing (goodbye, draining)
//   tcp_send.cc       the send side: isend, queued chunks, writing
//   tcp_receive.cc    the receive side: irecv, reading frames into (or
//                     reducing them into) their receives, parked streams
//   tcp_control.cc    control frames (abort, bye, status query and answer)
//                     and the failures they and closed connections report
//   tcp_progress.cc   the progress loop: epoll, poll, wait_some, begin_call
#pragma once

#include "core/check.h"
#include "core/fd.h"
#include "store/store.h"
#include "transport/tcp/tcp_transport.h"
#include "transport/tcp/tcp_wire.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace chorus::tcp {

// Striping unit when a peer has several streams; a multiple of every element
// size, so that a reducing receive always gets whole elements per chunk.
inline constexpr size_t kChunkBytes = size_t{256} << 10;
// Staging slice of a reducing receive: large enough to amortize the reduce
// call, small enough to stay in cache.
inline constexpr size_t kStagingBytes = size_t{64} << 10;
// Bytes read from one stream per progress pass before the others get a turn.
inline constexpr size_t kReadBudget = size_t{4} << 20;
// A wait blocked this long asks the peers which call they are in, and again
// every period while it stays blocked (wait_some).
inline constexpr auto kStatusQueryAfter = std::chrono::milliseconds(20);
inline constexpr auto kStatusQueryPeriod = std::chrono::milliseconds(500);
// How long a closing transport tries to hand its goodbye frames to the kernel.
inline constexpr auto kByeGrace = std::chrono::milliseconds(200);

struct RecvReq {
  RequestId id = 0;
  uint8_t* dst = nullptr;
  size_t bytes = 0;
  CallStamp stamp;
  std::optional<Reducer> reducer;
  WriteMode store =
      WriteMode::cached;  // how a reduction writes dst (the kernel's recv writes the rest)
  size_t received = 0;
  bool complete = false;
};

// One chunk queued on a stream: its header, then its payload.
struct OutChunk {
  RequestId send = 0;  // 0 for control frames (abort, bye)
  uint8_t header[kHeaderBytes];
  const uint8_t* data = nullptr;
  size_t len = 0;
  size_t written = 0;  // of kHeaderBytes + len
};

struct Stream {
  Fd fd;
  int peer = -1;
  bool control = false;  // the peer's control connection: no data frames
  uint32_t events = 0;   // as registered with epoll
  bool closed = false;   // EOF seen or socket given up
  bool bye = false;      // the peer said goodbye on this stream
  bool rdhup = false;    // the peer shut its side while this stream was parked
  // --- send side
  std::deque<OutChunk> out;
  // --- receive side
  uint8_t header[kHeaderBytes];
  size_t header_got = 0;
  bool parked = false;      // header read, its receive not posted yet
  bool in_payload = false;  // reading the payload of `frame`
  FrameHeader frame;
  RecvReq* target = nullptr;
  size_t got = 0;      // payload bytes of this chunk read so far
  size_t applied = 0;  // payload bytes already reduced into the destination
  size_t staged = 0;   // bytes in staging not yet reduced
  std::vector<uint8_t> staging;
  std::string abort_reason;
};

struct Peer {
  std::vector<Stream*> streams;  // data
  Stream* control = nullptr;     // abort and status frames, never parked
  bool connected = false;        // part of this transport's mesh
  uint64_t send_seq = 0;
  size_t next_stream = 0;
  uint64_t recv_base = 0;     // seq of recvs.front()
  std::deque<RecvReq> recvs;  // posted, in seq order; completed ones leave from the front
  size_t sends_in_flight = 0;
  size_t streams_closed = 0;
  CallStamp last_heard;  // the call of the last data frame from the peer
  // Its answer to the last status query.
  bool answered = false;
  uint32_t answered_collectives = 0;
  CallStamp answered_call;
};

class TcpTransport final : public Transport {
 public:
  TcpTransport(int rank, int size, const TcpOptions& options);
  ~TcpTransport() override;

  // Makes and registers every connection (tcp::connect_mesh); see
  // make_tcp_transport.
  void connect(Store& store);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  TransportKind kind() const override { return TransportKind::tcp; }
  std::string address() const override {
    return options_.address.empty() ? "127.0.0.1" : options_.address;
  }

  RequestId isend(int peer, const void* data, size_t bytes, const CallStamp& stamp) override;
  RequestId irecv(int peer, void* dst, size_t bytes, const Reducer* reducer, const CallStamp& stamp,
                  WriteMode store) override;
  void poll(std::vector<RequestId>& done) override;
  void begin_call(const CallStamp& stamp) override;
  std::optional<CallStamp> waiting_message(int peer) override;
  // Asks every connected peer where it is; a peer answers from its own
  // progress loop, that is, while it is inside a call.
  std::vector<PeerProgress> peer_progress(Deadline deadline) override;
  void wait_some(std::vector<RequestId>& done, Deadline deadline) override;
  void interrupt() override;
  void abort(ErrorCode cause, const std::string& reason) override;

 private:
  std::string where() const { return str_cat("rank ", rank_, ": tcp: "); }

  // --- construction and closing (tcp_transport.cc)

  // Registers one connection that tcp::connect_mesh established.
  void add_stream(Fd fd, int peer, uint32_t index);
  // A failed rank sends its reason, any other a goodbye; then drains what
  // peers sent, so that closing never resets a connection with unread data.
  void close_all();

  // --- send side (tcp_send.cc)

  // Writes what the kernel takes of the stream's queued chunks.
  void write_stream(Stream& s);
  void complete_send_chunk(RequestId id, int peer);
  // Queues a frame without payload on `s` (after what is queued there).
  void queue_control(Stream& s, const FrameHeader& h);

  // --- receive side (tcp_receive.cc)

  // The peer `peer` when this rank may exchange messages with it; throws
  // otherwise (`what`: "send to", "receive from").
  Peer& usable_peer(int peer, const char* what);
  // Reads what the stream has, up to kReadBudget bytes.
  void read_stream(Stream& s);
  // A frame header is complete in s.header: validates it and dispatches it.
  void header_done(Stream& s);
  // The header in s.frame is complete and its receive is posted (or not).
  // Validates the header against the receive and starts reading the payload.
  void start_chunk(Stream& s);
  void finish_chunk(Stream& s);
  // A parked message (its header read, no receive posted for it) of this
  // rank's current collective call number with another stamp proves that
  // its sender is in another call: a broadcast rooted elsewhere sends to
  // ranks that receive from no one on that path.
  void check_parked(const Stream& s);
  // The peer closed its side while its next chunk waits unread in the kernel.
  // A peer that closed on purpose sent a goodbye after its data, so more than
  // the chunk's payload is queued; exactly the payload (or less) means it
  // died after (or while) sending it.
  void parked_hangup(Stream& s, uint32_t events);
  // Handles the EOF of a stream at a frame boundary.
  void stream_eof(Stream& s);
  void stream_error(Stream& s, const std::string& what);
  void protocol_error(Stream& s, const std::string& what);
  void close_stream(Stream& s);

  // --- control frames and failures (tcp_control.cc)

  // A frame other than data, its header just read: bye, status query,
  // status answer, or the header of an abort frame.
  void control_frame(Stream& s);
  // An abort frame has arrived whole (its reason in s.abort_reason).
  void abort_frame_done(Stream& s);
  // The cause an abort frame carries in its seq (peer_failure when unknown).
  static ErrorCode abort_cause(const FrameHeader& h);
  // Sends a status query to every connected peer; returns whom it asked.
  std::vector<int> query_status();
  // Records the first failure; poll() and wait_some() raise it. A failure a
  // peer reported itself (an abort frame with its reason) is the cause; one
  // inferred from a closed connection is often its consequence (a third rank
  // learnt of the cause first and went away), so until the failure has been
  // raised, a reported one replaces an inferred one.
  void peer_failed(int peer, ErrorCode code, const std::string& what);
  // A peer's abort frame: its reason is the origin of the failure.
  void peer_reported(int peer, ErrorCode cause, const std::string& reason);
  void record_failure(std::exception_ptr error, bool reported);
  [[noreturn]] void raise_failure();

  // --- progress (tcp_progress.cc)

  // One epoll_wait (at most timeout_ms) and the reads and writes it allows.
  void progress(int timeout_ms);
  // Requests that completed before a failure was seen are delivered first:
  // a peer that sent its last message and then went away (a rank that
  // finished its part) must not fail a call it had already served. The
  // failure is raised at the next take() that has nothing to deliver, and
  // at the next isend, irecv or call.
  bool take(std::vector<RequestId>& done);
  // Registers with epoll what the stream waits for now.
  void update_events(Stream& s);
  // Whether interrupt() was called since the last look (which clears it).
  bool interrupted();
  // After set-up the mesh is complete: any further connection is refused.
  void refuse_late_connections();

  int rank_;
  int size_;
  TcpOptions options_;
  std::vector<Peer> peers_;
  Fd epoll_;
  Fd wake_;  // an eventfd in epoll_: interrupt() writes it
  std::atomic<bool> interrupted_{false};
  Fd listen_;
  std::vector<std::unique_ptr<Stream>> streams_;
  std::unordered_map<RequestId, size_t> sends_left_;  // chunks not yet written
  std::vector<RequestId> completed_;
  std::exception_ptr failure_;
  ErrorCode failure_code_ = ErrorCode::internal;
  std::string failure_text_;
  bool failure_reported_ = false;  // failure_ came from the peer's abort frame
  bool failure_raised_ = false;    // failure_ has been thrown: it stays
  bool aborted_ = false;
  RequestId next_id_ = 1;
  CallStamp current_;         // the call this rank is in (status answers)
  uint32_t collectives_ = 0;  // the number of its last collective call
};

}  // namespace chorus::tcp
