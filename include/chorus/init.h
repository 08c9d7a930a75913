// Starting a multi-process job: init() builds the Communicator of one rank from
// its rank, the world size and a rendezvous store; init_from_env() reads those
// from the environment that chorus-run, torchrun, mpirun or srun set up.
//
//   // every process of the job:
//   chorus::Communicator comm = chorus::init_from_env();
//   comm.allreduce(buf, buf, n, chorus::DataType::float32, chorus::ReduceOp::sum);
//
// Transports: processes on the same host talk through shared memory, the
// others through TCP; CHORUS_TRANSPORT=shm|tcp (or InitOptions::transport)
// forces one for every peer.
#pragma once

#include <chorus/communicator.h>

#include <chrono>
#include <string>

namespace chorus {

struct InitOptions {
  int rank = -1;
  int world_size = -1;
  // "file:///shared/dir" (a directory every rank can reach) or
  // "tcp://host:port" (rank 0 serves the store at host:port, the others
  // connect to it, retrying until the deadline).
  std::string store;
  // "" (automatic: shm within a host, tcp across hosts), "shm" or "tcp".
  // Overrides CHORUS_TRANSPORT.
  std::string transport;
  // Deadline of the start-up (store, connections); 0 = CHORUS_TIMEOUT.
  std::chrono::milliseconds timeout{0};
  // "" (CHORUS_PROGRESS, default thread), "thread" or "caller": who advances
  // outstanding work while the caller computes (communicator.h). Overrides
  // CHORUS_PROGRESS.
  std::string progress;
  // A CPU number for the progress thread; -1: CHORUS_PROGRESS_CPU (default:
  // not pinned).
  int progress_cpu = -1;
};

// Collective over the ranks of the job: every rank calls it with the same
// store and world size. Throws Error(invalid_argument) for bad options,
// Error(timeout) when a peer does not show up in time, Error(peer_failure)
// when the store server is unreachable. Each call on the same store makes a
// new communicator with keys of its own.
Communicator init(const InitOptions& options);

// init() with rank, world size and store from the environment:
// CHORUS_RANK, CHORUS_WORLD_SIZE, CHORUS_STORE; else torchrun's RANK,
// WORLD_SIZE, MASTER_ADDR, MASTER_PORT; Open MPI's OMPI_COMM_WORLD_RANK/_SIZE;
// MPICH Hydra's PMI_RANK/PMI_SIZE; Slurm's SLURM_PROCID/SLURM_NTASKS (the
// store then comes from CHORUS_STORE or MASTER_ADDR/MASTER_PORT). A missing or
// contradictory variable is an Error(invalid_argument) that names it.
Communicator init_from_env();

// A process that joins a running job: its part of the members'
// Communicator::grow (communicator.h). Reads CHORUS_STORE (the job's store)
// and CHORUS_JOIN_GENERATION (the generation of the grow to join: 1 for
// the job's first grow), and the CHORUS_* settings as init_from_env does;
// CHORUS_TIMEOUT bounds the wait for the grow. Error(invalid_argument) for
// a missing or malformed variable (naming it) and for a late joiner (the
// grow has all its joiners), Error(timeout) when no grow of that generation
// comes (naming the latest one).
Communicator join_from_env();

}  // namespace chorus
