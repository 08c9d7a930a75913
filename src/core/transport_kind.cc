#include "core/transport_kind.h"

#include "core/check.h"

#include <algorithm>
#include <array>

namespace chorus {
namespace {

struct KindRow {
  TransportKind kind;
  std::string_view name;
  std::string_view link_class;
};

// One row per kind, in the enum's order.
constexpr std::array<KindRow, 4> kKinds{{
    {TransportKind::inproc, "inproc", "inproc"},
    {TransportKind::shm, "shm", "shm"},
    {TransportKind::tcp, "tcp", "tcp"},
    // A mixed job's slowest links are its tcp ones: tune for those.
    {TransportKind::shm_tcp, "shm+tcp", "tcp"},
}};

constexpr std::array<TransportKind, 3> kRequestable{TransportKind::inproc, TransportKind::shm,
                                                    TransportKind::tcp};
constexpr std::array<TransportKind, 2> kProcess{TransportKind::shm, TransportKind::tcp};

const KindRow* row_of(TransportKind kind) {
  const auto i = static_cast<size_t>(kind);
  return i < kKinds.size() ? &kKinds[i] : nullptr;
}

}  // namespace

std::string_view to_string(TransportKind kind) {
  const KindRow* row = row_of(kind);
  return row ? row->name : "invalid";
}

std::optional<TransportKind> parse_transport_kind(std::string_view name) {
  for (const KindRow& row : kKinds)
    if (row.name == name) return row.kind;
  return std::nullopt;
}

std::optional<TransportKind> parse_transport_kind(std::string_view name,
                                                  std::span<const TransportKind> among) {
  const std::optional<TransportKind> kind = parse_transport_kind(name);
  if (!kind || std::find(among.begin(), among.end(), *kind) == among.end()) return std::nullopt;
  return kind;
}

std::span<const TransportKind> requestable_transports() {
  return kRequestable;
}

std::span<const TransportKind> process_transports() {
  return kProcess;
}

std::string transport_names(std::span<const TransportKind> kinds) {
  std::string out;
  for (TransportKind k : kinds) {
    if (!out.empty()) out += ", ";
    out += to_string(k);
  }
  return out;
}

std::vector<std::string> transport_name_list(std::span<const TransportKind> kinds) {
  std::vector<std::string> out;
  for (TransportKind k : kinds) out.emplace_back(to_string(k));
  return out;
}

std::string_view link_class(TransportKind kind) {
  const KindRow* row = row_of(kind);
  return row ? row->link_class : "invalid";
}

TransportKind parse_process_transport(std::string_view value, std::string_view subject) {
  if (const auto kind = parse_transport_kind(value, process_transports())) return *kind;
  if (parse_transport_kind(value) == TransportKind::inproc)
    fail(ErrorCode::invalid_argument, subject,
         ": inproc ranks are threads of one process, which the program that runs them starts "
         "itself (chorus::testing::run_ranks, chorus-perf --transport inproc); a process of a "
         "multi-process job uses one of ",
         transport_names(process_transports()));
  fail(ErrorCode::invalid_argument, subject, " is not one of ",
       transport_names(process_transports()));
}

}  // namespace chorus
