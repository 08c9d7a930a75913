// Edits of Programs for the verifier's mutation tests.
#pragma once

#include "schedule/program.h"

namespace chorus::test {

// Removes op i; ops that depended on it inherit its deps, so the rest of the
// ordering is kept.
void erase_op(Program& p, OpIndex i);

}  // namespace chorus::test
