// Shared-memory transport: the ranks are processes on one host.
//
// Each rank creates one POSIX shared-memory segment holding its receive side:
// one FIFO of slots per sending peer, and one futex "doorbell" word that every
// sender bumps. Peers publish their segment name and pid through the Store,
// map each other's segments, and unlink them as soon as every rank has
// attached, so nothing is left in /dev/shm even when a rank is killed later.
//
// Waits spin for ShmOptions::spin and then sleep on the doorbell; a sender
// issues FUTEX_WAKE only when the receiver has announced that it sleeps. A
// rank bound to a core of its own spins on it; otherwise it yields the core
// after a few microseconds (at once when the ranks outnumber their CPUs).
// Sends that go through slots complete as soon as they are published. Large messages stream through
// the FIFO in slices, or, where the kernel allows it, are read in one copy straight out of the
// sender's buffer with process_vm_readv (Cross Memory Attach).
//
//   ShmOptions opt;
//   opt.spin = config.spin;
//   opt.deadline = Clock::now() + config.timeout;
//   auto t = make_shm_transport(store, rank, size, opt);  // collective
#pragma once

#include "store/store.h"
#include "transport/transport.h"

#include <chrono>
#include <cstddef>
#include <memory>

namespace chorus {

struct ShmOptions {
  // How long a waiting rank spins (with sched_yield) before it sleeps on its
  // doorbell futex. 0 sleeps at once. Comes from Config::spin (CHORUS_SPIN_US).
  std::chrono::microseconds spin{50};
  // Bytes of one slot of a FIFO, and slots per FIFO (one FIFO per sending
  // peer). A message larger than a slot streams through several slots.
  size_t slot_bytes = size_t{256} << 10;
  size_t slots = 8;
  // Messages of at least this many bytes go single-copy (process_vm_readv)
  // when the kernel permits it; 0 (the default) disables the single-copy path.
  // Off by default because, measured on the 2-core development host
  // (bench/shm_benchmark), the two-copy slot pipeline gave about twice the
  // N=2 ring AllReduce bus bandwidth (reductions through process_vm_readv
  // need a read into a small buffer first, and the kernel's page pinning is
  // slow there); CMA only won plain 64 MiB streams, by about a quarter.
  size_t cma_threshold = 0;
  // Deadline for set-up (store exchange and attaching the peers' segments).
  Deadline deadline = Clock::now() + std::chrono::seconds(60);
};

// Builds the shm transport of `rank` in a group of `size` processes on this
// host. Collective: every rank calls it with the same store (a key space of
// its own, e.g. a PrefixStore per communicator) and the same slot options.
// Throws Error(timeout) when a peer does not show up before options.deadline,
// Error(mismatch) when ranks disagree on the options, Error(system) when
// shared memory cannot be created.
std::unique_ptr<Transport> make_shm_transport(Store& store, int rank, int size,
                                              const ShmOptions& options);

}  // namespace chorus
