#include "core/call_stamp.h"

#include "core/check.h"

namespace chorus {

CallStamp collective_stamp(uint32_t seq, Collective collective, uint8_t algorithm, DataType type,
                           ReduceOp op, uint64_t count, int root) {
  CallStamp s;
  s.count = count;
  s.seq = seq;
  s.root = rooted(collective) ? root : 0;
  s.kind = static_cast<uint8_t>(static_cast<int>(collective) + 1);
  s.algorithm = algorithm;
  s.type = static_cast<uint8_t>(type);
  s.op = reduces(collective) ? static_cast<uint8_t>(op) : 0;
  return s;
}

CallStamp point_to_point_stamp(uint32_t seq, DataType type, uint64_t count, int tag) {
  CallStamp s;
  s.count = count;
  s.seq = seq;
  s.root = tag;
  s.kind = CallStamp::kPointToPoint;
  s.type = static_cast<uint8_t>(type);
  return s;
}

std::string describe(const CallStamp& s, std::string_view algorithm) {
  // A stamp may come off the wire: every field is checked before it is named.
  const auto type = static_cast<DataType>(s.type);
  const std::string type_name =
      is_valid(type) ? std::string(to_string(type)) : str_cat("dtype #", int{s.type});
  if (s.kind == 0) return "no call";
  if (s.point_to_point())
    return str_cat("point-to-point(", type_name, ", count ", s.count, ", tag ", s.root, ")");
  if (s.kind > kCollectiveCount) return str_cat("an unknown call (kind ", int{s.kind}, ")");
  const auto collective = static_cast<Collective>(s.kind - 1);
  std::string out = str_cat(to_string(collective), "(");
  if (!algorithm.empty()) out += str_cat(algorithm, ", ");
  out += type_name;
  if (reduces(collective)) {
    const auto op = static_cast<ReduceOp>(s.op);
    out += is_valid(op) ? str_cat(" ", to_string(op)) : str_cat(" op #", int{s.op});
  }
  if (has_data(collective)) out += str_cat(", count ", s.count);
  if (rooted(collective)) out += str_cat(", root ", s.root);
  if (s.part != 0) {
    const auto whole = static_cast<Collective>((s.part >> 8) - 1);
    out += is_valid(whole) && (s.part >> 8) != 0
               ? str_cat("; part ", s.part & 0xff, " of a deterministic ", to_string(whole))
               : str_cat("; part #", s.part);
  }
  return out + ")";
}

namespace {
std::string side(int rank, int other, const CallStamp& s, std::string_view algorithm, bool sender) {
  if (s.point_to_point())
    return str_cat("rank ", rank, sender ? " sent " : " posted ", describe(s, algorithm),
                   " as its message ", s.seq, sender ? " to rank " : " from rank ", other);
  if (s.kind == 0)
    return str_cat("rank ", rank, sender ? " sent a message" : " posted a receive",
                   " outside any call");
  return str_cat("rank ", rank, " called ", describe(s, algorithm), " as call ", s.seq);
}
}  // namespace

std::string describe_mismatch(int sender, const CallStamp& sent, std::string_view sent_algorithm,
                              int receiver, const CallStamp& expected,
                              std::string_view expected_algorithm) {
  return str_cat(side(sender, receiver, sent, sent_algorithm, true), "; ",
                 side(receiver, sender, expected, expected_algorithm, false));
}

}  // namespace chorus
