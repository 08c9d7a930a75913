// The calls of ProcessGroupChorus (process_group.h) made of chorus's
// point-to-point messages: the user's send and recv, and the collectives the
// C++ API lacks (all_to_all of a list, uneven all_to_all_single). Each rank
// sends to and receives from the others in the same
// order, so that the k-th send from a to b meets the k-th recv at b from a.
#include "torch_backend/process_group.h"

#include <cstring>

namespace chorus::torch_backend {
namespace {

// One message of `bytes` raw bytes to or from `peer`.
Call send_bytes(const std::byte* data, size_t bytes, int peer, const CallOptions& options) {
  return Call::send_to(data, bytes, DataType::uint8, peer, options);
}
Call recv_bytes(std::byte* data, size_t bytes, int peer, const CallOptions& options) {
  return Call::recv_from(data, bytes, DataType::uint8, peer, options);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  const std::string call = "all_to_all";
  if (outputs.size() != static_cast<size_t>(size_) || inputs.size() != static_cast<size_t>(size_))
    unsupported(call, "takes lists of " + std::to_string(size_) + " input and output tensors");
  for (int j = 0; j < size_; ++j) {
    check_tensor(inputs[static_cast<size_t>(j)], call);
    check_tensor(outputs[static_cast<size_t>(j)], call);
    if (inputs[static_cast<size_t>(j)].scalar_type() != inputs[0].scalar_type() ||
        outputs[static_cast<size_t>(j)].scalar_type() != inputs[0].scalar_type())
      unsupported(call, "all tensors must have one dtype");
  }
  const auto self = static_cast<size_t>(rank_);
  if (inputs[self].nbytes() != outputs[self].nbytes())
    unsupported(call, "rank " + std::to_string(rank_) + " sends itself " +
                          std::to_string(inputs[self].nbytes()) + " bytes into a " +
                          std::to_string(outputs[self].nbytes()) + "-byte output");
  std::vector<Staged> src, dst;
  for (int j = 0; j < size_; ++j) {
    src.push_back(stage(inputs[static_cast<size_t>(j)], Use::read));
    dst.push_back(stage(outputs[static_cast<size_t>(j)], Use::write));
  }
  const CallOptions options = call_options(opts.timeout);
  const int me = rank_;
  const int n = size_;
  return enqueue(
      c10d::OpType::ALLTOALL, call, outputs,
      [=](Calls& calls) {
        for (int j = 0; j < n; ++j) {
          const auto u = static_cast<size_t>(j);
          if (j == me) {
            std::memmove(dst[u].data(), src[u].data(), src[u].buffer.nbytes());
            continue;
          }
          calls.submit(send_bytes(src[u].data(), src[u].buffer.nbytes(), j, options));
          calls.submit(recv_bytes(dst[u].data(), dst[u].buffer.nbytes(), j, options));
        }
      },
      [dst] {
        for (const Staged& d : dst) d.write_back();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::send(std::vector<at::Tensor>& tensors,
                                                        int dst_rank, int tag) {
  const std::string call = "send";
  at::Tensor& t = single(tensors, call);
  const CallOptions options = tagged(tag, call);
  check_peer(dst_rank, call);
  const Elements e = elements(t, call, false);
  const Staged s = stage(t, Use::read);
  return enqueue(
      c10d::OpType::SEND, call, {t},
      [=](Calls& calls) {
        calls.submit(Call::send_to(s.data(), e.count, e.type, dst_rank, options));
      },
      [] {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recv(std::vector<at::Tensor>& tensors,
                                                        int src_rank, int tag) {
  const std::string call = "recv";
  at::Tensor& t = single(tensors, call);
  const CallOptions options = tagged(tag, call);
  check_peer(src_rank, call);
  const Elements e = elements(t, call, false);
  const Staged s = stage(t, Use::write);
  return enqueue(
      c10d::OpType::RECV, call, {t},
      [=](Calls& calls) {
        calls.submit(Call::recv_from(s.data(), e.count, e.type, src_rank, options));
      },
      [s] { s.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  const std::string call = "recv";
  at::Tensor& t = single(tensors, call);
  const CallOptions options = tagged(tag, call);
  if (size_ < 2) unsupported(call, "a receive from any rank needs another rank in the group");
  const Elements e = elements(t, call, false);
  const Staged s = stage(t, Use::write);
  auto source = std::make_shared<std::atomic<int>>(-1);
  // chorus's recv_any blocks until a message arrives: on a thread of its own,
  // so that the caller goes on (the communicator's other calls wait behind it).
  c10::intrusive_ptr<c10d::Work> work = enqueue_blocking(
      c10d::OpType::RECVANYSOURCE, call, {t},
      [=](Calls& calls) {
        source->store(calls.comm().recv_any(s.data(), e.count, e.type, options));
      },
      [s] { s.write_back(); });
  static_cast<ChorusWork&>(*work).set_source(source);
  return work;
}

std::vector<ProcessGroupChorus::Block> ProcessGroupChorus::split_rows(
    const at::Tensor& t, const std::vector<int64_t>& splits, const std::string& call,
    const char* what) const {
  if (t.dim() == 0)
    unsupported(call, std::string("the ") + what + " is a scalar; splits need rows");
  const int64_t rows = t.size(0);
  const size_t row_bytes = rows == 0 ? 0 : t.nbytes() / static_cast<size_t>(rows);
  std::vector<Block> blocks(static_cast<size_t>(size_));
  if (splits.empty()) {
    if (rows % size_ != 0)
      unsupported(call, std::string("the ") + what + "'s " + std::to_string(rows) +
                            " rows do not split evenly among " + std::to_string(size_) + " ranks");
    for (int j = 0; j < size_; ++j)
      blocks[static_cast<size_t>(j)] = {
          static_cast<size_t>(j) * t.nbytes() / static_cast<size_t>(size_),
          t.nbytes() / static_cast<size_t>(size_)};
    return blocks;
  }
  if (splits.size() != static_cast<size_t>(size_))
    unsupported(call, std::string("the ") + what + " splits have " + std::to_string(splits.size()) +
                          " entries for a group of " + std::to_string(size_));
  int64_t row = 0;
  for (int j = 0; j < size_; ++j) {
    const int64_t n = splits[static_cast<size_t>(j)];
    if (n < 0) unsupported(call, std::string("negative ") + what + " split " + std::to_string(n));
    blocks[static_cast<size_t>(j)] = {static_cast<size_t>(row) * row_bytes,
                                      static_cast<size_t>(n) * row_bytes};
    row += n;
  }
  if (row != rows)
    unsupported(call, std::string("the ") + what + " splits add up to " + std::to_string(row) +
                          " rows, the " + what + " has " + std::to_string(rows));
  return blocks;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::exchange(
    c10d::OpType type, const std::string& call, std::vector<at::Tensor> outputs, const Staged& src,
    const std::vector<Block>& send, const Staged& dst, const std::vector<Block>& recv,
    const CallOptions& options) {
  const int me = rank_;
  const int n = size_;
  const Block mine_out = send[static_cast<size_t>(me)];
  const Block mine_in = recv[static_cast<size_t>(me)];
  if (mine_out.bytes != mine_in.bytes)
    unsupported(call, "rank " + std::to_string(me) + " sends itself " +
                          std::to_string(mine_out.bytes) + " bytes into a block of " +
                          std::to_string(mine_in.bytes));
  return enqueue(
      type, call, std::move(outputs),
      [=](Calls& calls) {
        for (int j = 0; j < n; ++j) {
          const auto u = static_cast<size_t>(j);
          if (j == me) {
            std::memmove(dst.data() + mine_in.offset, src.data() + mine_out.offset, mine_in.bytes);
            continue;
          }
          calls.submit(send_bytes(src.data() + send[u].offset, send[u].bytes, j, options));
          calls.submit(recv_bytes(dst.data() + recv[u].offset, recv[u].bytes, j, options));
        }
      },
      [dst] { dst.write_back(); });
}

}  // namespace chorus::torch_backend
