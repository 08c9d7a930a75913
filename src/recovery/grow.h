// Communicator::grow and chorus::join_from_env (include/chorus/communicator.h,
// init.h): the members of a communicator and `joining` new processes make
// one communicator of them all, the joiners ranked after the members.
//
// The joiners know only the job's store and the generation of the grow
// they are for (CHORUS_JOIN_GENERATION: the grows made on the members'
// line since init(), this one included). Under "chorus/grow/<G>/" of the
// job's store:
//
//   1. The members' rank 0 claims the generation ("claimed": a second grow
//      of the same generation, from another line of communicators, fails as
//      a mismatch), opens a set-up point as a split's leader does (a store
//      server with a fresh secret) and publishes its invitation with the
//      number of members and joiners ("invitation"), and the generation as
//      the job's latest ("chorus/grow/latest"). It hands the invitation to
//      the other members over the communicator.
//   2. A joiner waits for the invitation of its generation, then takes a
//      place ("joiners", counted from 1): the i-th is rank members + i - 1.
//      A place beyond the grow's joiners is a late joiner, refused; a
//      generation that no grow publishes within the timeout is refused
//      naming the latest one.
//   3. Members and joiners build their transports over the set-up point
//      (join_setup, a split's step 3); its final barrier is passed by all
//      or by none. The members' rank 0 keeps the store server for as long
//      as its new communicator lives.
#pragma once

#include <chorus/communicator.h>

#include <chrono>

namespace chorus::detail {

// Communicator::grow. `timeout` 0: the communicator's (CHORUS_TIMEOUT).
Communicator grow(Communicator& comm, int joining, std::chrono::milliseconds timeout);

// chorus::join_from_env.
Communicator join_from_env();

}  // namespace chorus::detail
