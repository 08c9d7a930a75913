// Shared windows: memory that every rank of a communicator on one host can
// address, and the flags and per-call records that one-sided Programs use.
//
// A SharedWindow is one collective allocation: every rank creates an
// anonymous memory file (memfd) of the same size, the ranks exchange
// (pid, fd), and every rank maps every other rank's file through
// /proc/<pid>/fd/<fd>. No name exists in any file system, so nothing is left
// behind whatever way a rank ends (SIGKILL included): the kernel frees a
// rank's memory once the last mapping of it is gone, that is, when the last
// rank lets go.
//
// A WindowSet is a communicator's one-sided state:
//   - the control window: per rank, one cache line of flags per signalling
//     peer, and the record of where this rank's shared input and output of
//     its current call are;
//   - the staging window, where Programs on ordinary buffers copy what their
//     peers read (grown, collectively, to the largest call that needs it);
//   - the user's windows (Communicator::window), numbered in creation order,
//     which is the same on every rank.
// Flags hold call numbers: signal stores the call's number, and a wait is
// satisfied once the flag holds at least its call's number, so that flags
// never need resetting.
#pragma once

#include "core/call_stamp.h"
#include "schedule/program.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace chorus {

// What a rank tells the others about its part of a window being created.
struct WindowRecord {
  int64_t pid = 0;
  int64_t fd = -1;
  uint64_t bytes = 0;
};
// Exchanges one record per rank (an allgather; records[r] is rank r's).
using RecordExchange = std::function<std::vector<WindowRecord>(const WindowRecord& mine)>;

class SharedWindow {
 public:
  // Collective: every rank calls it with the same `bytes`, in the same order
  // relative to other collectives; `exchange` runs twice (the records, then
  // a barrier so that no rank closes its file before all have mapped it).
  static std::shared_ptr<SharedWindow> create(int rank, int nranks, size_t bytes,
                                              const RecordExchange& exchange);
  ~SharedWindow();
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  int rank() const { return rank_; }
  int size() const { return static_cast<int>(maps_.size()); }
  size_t bytes() const { return bytes_; }
  // Rank q's part, as this process maps it.
  std::byte* base(int q) const { return maps_[static_cast<size_t>(q)]; }
  std::byte* data() const { return base(rank_); }
  // Whether [p, p + n) lies inside this rank's part; its offset there.
  bool contains(const void* p, size_t n) const;

 private:
  SharedWindow(int rank, size_t bytes) : rank_(rank), bytes_(bytes) {}
  int rank_;
  size_t bytes_;
  std::vector<std::byte*> maps_;
};

// Where one rank's shared input and output of its current call are.
// window: 0 the staging window, k >= 1 the user's window number k.
struct SharedPlace {
  uint32_t window = 0;
  uint64_t offset = 0;  // bytes
};

class WindowSet {
 public:
  WindowSet(int rank, int nranks, RecordExchange exchange);

  int rank() const { return rank_; }
  int size() const { return nranks_; }

  // Collective, in the call path: makes the control window at the first use
  // (ensure_control), and a staging window of at least `bytes` (ensure_staging).
  // Both run exchanges over the RecordExchange, so every rank must ask for
  // the same, which the call's stamp, published in between, lets peers check.
  void ensure_control();
  void ensure_staging(size_t staging_bytes);
  bool ready() const { return control_ != nullptr; }
  std::byte* staging() const { return staging_ ? staging_->data() : nullptr; }
  size_t staging_bytes() const { return staging_ ? staging_->bytes() : 0; }

  // Collective: a new user window of `bytes` on every rank.
  std::shared_ptr<SharedWindow> create_user_window(size_t bytes);
  // The user window (number, offset) that holds [p, p + n) on this rank.
  bool find_user_window(const void* p, size_t n, SharedPlace& place) const;

  // Before any op of call `stamp.seq`, and before the exchanges that
  // prepare() runs for it: the call's stamp, so that peers can compare it with
  // their own before they read a byte of this rank's memory. Needs ready().
  void publish_stamp(const CallStamp& stamp);
  // Then, once the staging window is in place: where the call's shared input
  // and output are.
  void publish_places(uint32_t seq, SharedPlace input, SharedPlace output);
  // Peer q's stamp, when q's record is of call `seq` (read consistently even
  // while q moves on to its next call); false when it is of another call.
  bool peer_stamp(int q, uint32_t seq, CallStamp& stamp) const;
  // Peer q's shared `kind` (input or output) of call `seq`, or its staging
  // window (kind window), at `offset` bytes. Throws Error(mismatch) when q's
  // record is of another call, or names a window this rank does not have.
  const std::byte* peer_address(int q, uint32_t seq, BufferKind kind, size_t offset,
                                size_t bytes) const;
  // Raises `flag` for call `seq` at peer q (a release store).
  void signal(int q, uint32_t flag, uint32_t seq);
  // Whether q has raised `flag` here for call `seq` or a later one.
  bool signalled(int q, uint32_t flag, uint32_t seq) const;

 public:
  struct Control;  // window.cc

 private:
  Control* control(int q) const;

  int rank_;
  int nranks_;
  RecordExchange exchange_;
  std::shared_ptr<SharedWindow> control_;
  std::shared_ptr<SharedWindow> staging_;
  // User windows by number - 1; expired once the user let go.
  std::vector<std::weak_ptr<SharedWindow>> user_;
};

}  // namespace chorus
