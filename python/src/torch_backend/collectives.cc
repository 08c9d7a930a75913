// The calls of ProcessGroupChorus (process_group.h) that are one chorus
// collective each: the tensors are checked and staged here, in the calling
// thread, and submitted there as the collective's chorus::Call.
#include "torch_backend/process_group.h"

#include <chorus/error.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

namespace chorus::torch_backend {

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const std::string call = "broadcast";
  at::Tensor& t = single(tensors, call);
  if (opts.rootTensor != 0) unsupported(call, "rootTensor must be 0 (one tensor per process)");
  const int root = root_rank(opts.rootRank, call);
  const Elements e = elements(t, call, false);
  const Staged s = stage(t, Use::read_write);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::BROADCAST, call, {t},
      [=](Calls& calls) {
        calls.submit(Call::broadcast(s.data(), s.data(), e.count, e.type, root, options));
      },
      [s] { s.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  const std::string call = "all_reduce";
  if (tensors.size() == 1 && tensors[0].defined() && tensors[0].layout() == c10::kSparse)
    return sparse_allreduce(tensors[0], opts);
  at::Tensor& t = single(tensors, call);
  const Elements e = elements(t, call, true);
  const ReduceOp op = chorus_op(opts.reduceOp, call);
  const Staged s = stage(t, Use::read_write);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::ALLREDUCE, call, {t},
      [=](Calls& calls) {
        calls.submit(Call::allreduce(s.data(), s.data(), e.count, e.type, op, options));
      },
      [s] { s.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::sparse_allreduce(
    at::Tensor& t, const c10d::AllreduceOptions& opts) {
  const std::string call = "all_reduce";
  if (opts.reduceOp != c10d::ReduceOp::SUM)
    unsupported(call, "a sparse tensor is reduced with SUM only (as gloo does)");
  if (t.device().type() != c10::kCPU) unsupported(call, "the tensor is not on the CPU");
  const CallOptions options = call_options(opts.timeout);
  const int n = size_;
  return enqueue(
      c10d::OpType::ALLREDUCE, call, {t},
      [=](Calls& calls) {
        // Every rank's indices and values, padded to the largest count of
        // non-zeros, gathered; the sum is the coalesced union, which every
        // rank computes alike from the same bytes.
        const at::Tensor input = t.coalesce();
        const at::Tensor indices = input._indices().contiguous();
        const at::Tensor values = input._values().contiguous();
        const int64_t nnz = input._nnz();
        std::vector<int64_t> counts(static_cast<size_t>(n));
        calls.comm().allgather(&nnz, counts.data(), 1, DataType::int64, options);
        const int64_t most = *std::max_element(counts.begin(), counts.end());
        std::vector<int64_t> value_shape = values.sizes().vec();
        value_shape[0] = most;
        at::Tensor my_indices = at::zeros({indices.size(0), most}, indices.options());
        at::Tensor my_values = at::zeros(value_shape, values.options());
        my_indices.narrow(1, 0, nnz).copy_(indices);
        my_values.narrow(0, 0, nnz).copy_(values);
        my_indices = my_indices.contiguous();
        at::Tensor all_indices = at::empty({n, indices.size(0), most}, indices.options());
        std::vector<int64_t> all_shape{n};
        all_shape.insert(all_shape.end(), value_shape.begin(), value_shape.end());
        at::Tensor all_values = at::empty(all_shape, values.options());
        calls.comm().allgather(my_indices.data_ptr(), all_indices.data_ptr(), my_indices.nbytes(),
                               DataType::uint8, options);
        calls.comm().allgather(my_values.data_ptr(), all_values.data_ptr(), my_values.nbytes(),
                               DataType::uint8, options);
        std::vector<at::Tensor> index_parts;
        std::vector<at::Tensor> value_parts;
        for (int r = 0; r < n; ++r) {
          index_parts.push_back(all_indices[r].narrow(1, 0, counts[static_cast<size_t>(r)]));
          value_parts.push_back(all_values[r].narrow(0, 0, counts[static_cast<size_t>(r)]));
        }
        const at::Tensor sum =
            at::sparse_coo_tensor(at::cat(index_parts, 1), at::cat(value_parts, 0), input.sizes(),
                                  input.options())
                .coalesce();
        t.copy_(sum);
      },
      [] {});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  const std::string call = "all_reduce_coalesced";
  std::vector<Elements> counts;
  std::vector<Staged> staged;
  for (const at::Tensor& t : tensors) {
    check_tensor(t, call);
    counts.push_back(elements(t, call, true));
    staged.push_back(stage(t, Use::read_write));
  }
  const ReduceOp op = chorus_op(opts.reduceOp, call);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::ALLREDUCE_COALESCED, call, tensors,
      [=](Calls& calls) {
        for (size_t i = 0; i < staged.size(); ++i)
          calls.submit(Call::allreduce(staged[i].data(), staged[i].data(), counts[i].count,
                                       counts[i].type, op, options));
      },
      [staged] {
        for (const Staged& s : staged) s.write_back();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const std::string call = "reduce";
  at::Tensor& t = single(tensors, call);
  if (opts.rootTensor != 0) unsupported(call, "rootTensor must be 0 (one tensor per process)");
  const int root = root_rank(opts.rootRank, call);
  const Elements e = elements(t, call, true);
  const ReduceOp op = chorus_op(opts.reduceOp, call);
  const Staged s = stage(t, Use::read_write);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::REDUCE, call, {t},
      [=](Calls& calls) {
        calls.submit(Call::reduce(s.data(), s.data(), e.count, e.type, op, root, options));
      },
      [s] { s.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const std::string call = "all_gather";
  at::Tensor& in = single(inputs, call);
  if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
    unsupported(call, "takes one list of " + std::to_string(size_) + " output tensors");
  std::vector<at::Tensor>& list = outputs[0];
  for (size_t j = 0; j < list.size(); ++j)
    check_like(list[j], in, call, "output " + std::to_string(j), in.numel());
  const Elements e = elements(in, call, false);
  const Staged src = stage(in, Use::read);
  at::Tensor joined = as_one_buffer(list);
  const bool direct = joined.defined();
  if (!direct) joined = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::ALLGATHER, call, list,
      [=](Calls& calls) {
        calls.submit(Call::allgather(src.data(), joined.data_ptr(), e.count, e.type, options));
      },
      [=] {
        if (direct) return;
        for (size_t j = 0; j < list.size(); ++j)
          list[j].copy_(joined.narrow(0, static_cast<int64_t>(j) * in.numel(), in.numel())
                            .view(list[j].sizes()));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  const std::string call = "gather";
  at::Tensor& in = single(inputs, call);
  const int root = root_rank(opts.rootRank, call);
  std::vector<at::Tensor> list;
  at::Tensor joined;
  bool direct = false;
  if (rank_ == root) {
    if (outputs.size() != 1 || outputs[0].size() != static_cast<size_t>(size_))
      unsupported(call, "the root takes one list of " + std::to_string(size_) + " output tensors");
    list = outputs[0];
    for (size_t j = 0; j < list.size(); ++j)
      check_like(list[j], in, call, "output " + std::to_string(j), in.numel());
    joined = as_one_buffer(list);
    direct = joined.defined();
    if (!direct) joined = at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options());
  } else if (!outputs.empty()) {
    unsupported(call, "only the root (rank " + std::to_string(root) + ") takes output tensors");
  }
  const Elements e = elements(in, call, false);
  const Staged src = stage(in, Use::read);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::GATHER, call, list,
      [=](Calls& calls) {
        void* recv = joined.defined() ? joined.data_ptr() : nullptr;
        calls.submit(Call::gather(src.data(), recv, e.count, e.type, root, options));
      },
      [=] {
        if (direct || !joined.defined()) return;
        for (size_t j = 0; j < list.size(); ++j)
          list[j].copy_(joined.narrow(0, static_cast<int64_t>(j) * in.numel(), in.numel())
                            .view(list[j].sizes()));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  const std::string call = "scatter";
  at::Tensor& out = single(outputs, call);
  const int root = root_rank(opts.rootRank, call);
  at::Tensor joined;
  if (rank_ == root) {
    if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
      unsupported(call, "the root takes one list of " + std::to_string(size_) + " input tensors");
    for (size_t j = 0; j < inputs[0].size(); ++j)
      check_like(inputs[0][j], out, call, "input " + std::to_string(j), out.numel());
    joined = as_one_buffer(inputs[0]);
    if (!joined.defined()) {
      joined = at::empty({static_cast<int64_t>(size_) * out.numel()}, out.options());
      for (size_t j = 0; j < inputs[0].size(); ++j)
        joined.narrow(0, static_cast<int64_t>(j) * out.numel(), out.numel())
            .copy_(inputs[0][j].reshape({-1}));
    }
  } else if (!inputs.empty()) {
    unsupported(call, "only the root (rank " + std::to_string(root) + ") takes input tensors");
  }
  const Elements e = elements(out, call, false);
  const Staged dst = stage(out, Use::write);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::SCATTER, call, {out},
      [=](Calls& calls) {
        const void* send = joined.defined() ? joined.data_ptr() : nullptr;
        calls.submit(Call::scatter(send, dst.data(), e.count, e.type, root, options));
      },
      [dst] { dst.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const std::string call = "all_gather_coalesced";
  if (outputs.size() != static_cast<size_t>(size_))
    unsupported(call, "takes one list of output tensors per rank (" + std::to_string(size_) +
                          "), got " + std::to_string(outputs.size()));
  std::vector<Elements> counts;
  std::vector<Staged> sources;
  std::vector<at::Tensor> joined;
  std::vector<at::Tensor> written;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& in = inputs[i];
    check_tensor(in, call);
    for (size_t r = 0; r < outputs.size(); ++r) {
      if (outputs[r].size() != inputs.size())
        unsupported(call, "output list " + std::to_string(r) + " has " +
                              std::to_string(outputs[r].size()) + " tensors, the inputs " +
                              std::to_string(inputs.size()));
      check_like(outputs[r][i], in, call,
                 "output " + std::to_string(r) + "[" + std::to_string(i) + "]", in.numel());
      written.push_back(outputs[r][i]);
    }
    counts.push_back(elements(in, call, false));
    sources.push_back(stage(in, Use::read));
    joined.push_back(at::empty({static_cast<int64_t>(size_) * in.numel()}, in.options()));
  }
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::ALLGATHER_COALESCED, call, written,
      [=](Calls& calls) {
        for (size_t i = 0; i < sources.size(); ++i)
          calls.submit(Call::allgather(sources[i].data(), joined[i].data_ptr(), counts[i].count,
                                       counts[i].type, options));
      },
      [=] {
        for (size_t i = 0; i < joined.size(); ++i) {
          const int64_t numel = inputs[i].numel();
          for (size_t r = 0; r < outputs.size(); ++r) {
            at::Tensor out = outputs[r][i];
            out.copy_(
                joined[i].narrow(0, static_cast<int64_t>(r) * numel, numel).view(out.sizes()));
          }
        }
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  const std::string call = "all_gather_into_tensor";
  check_tensor(input, call);
  check_like(output, input, call, "the output", input.numel() * size_);
  const Elements e = elements(input, call, false);
  const Staged dst = stage(output, Use::write);
  const Staged src = stage(input, Use::read);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::_ALLGATHER_BASE, call, {output},
      [=](Calls& calls) {
        calls.submit(Call::allgather(src.data(), dst.data(), e.count, e.type, options));
      },
      [dst] { dst.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter";
  at::Tensor& out = single(outputs, call);
  if (inputs.size() != 1 || inputs[0].size() != static_cast<size_t>(size_))
    unsupported(call, "takes one list of " + std::to_string(size_) + " input tensors");
  const std::vector<at::Tensor>& list = inputs[0];
  for (size_t j = 0; j < list.size(); ++j)
    check_like(list[j], out, call, "input " + std::to_string(j), out.numel());
  const Elements e = elements(out, call, true);
  const ReduceOp op = chorus_op(opts.reduceOp, call);
  at::Tensor joined = as_one_buffer(list);
  if (!joined.defined()) {
    joined = at::empty({static_cast<int64_t>(size_) * out.numel()}, out.options());
    for (size_t j = 0; j < list.size(); ++j)
      joined.narrow(0, static_cast<int64_t>(j) * out.numel(), out.numel())
          .view(list[j].sizes())
          .copy_(list[j]);
  }
  const Staged dst = stage(out, Use::write);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::REDUCE_SCATTER, call, {out},
      [=](Calls& calls) {
        calls.submit(
            Call::reduce_scatter(joined.data_ptr(), dst.data(), e.count, e.type, op, options));
      },
      [dst] { dst.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const std::string call = "reduce_scatter_tensor";
  check_tensor(output, call);
  check_like(input, output, call, "the input", output.numel() * size_);
  const Elements e = elements(output, call, true);
  const ReduceOp op = chorus_op(opts.reduceOp, call);
  const Staged dst = stage(output, Use::write);
  const Staged src = stage(input, Use::read);
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, call, {output},
      [=](Calls& calls) {
        calls.submit(Call::reduce_scatter(src.data(), dst.data(), e.count, e.type, op, options));
      },
      [dst] { dst.write_back(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  const std::string call = "all_to_all_single";
  check_tensor(input, call);
  check_tensor(output, call);
  if (output.scalar_type() != input.scalar_type())
    unsupported(call, std::string("the output has dtype ") + c10::toString(output.scalar_type()) +
                          ", the input " + c10::toString(input.scalar_type()));
  const CallOptions options = call_options(opts.timeout);
  const Staged dst = stage(output, Use::write);
  const Staged src = stage(input, Use::read);
  if (output_splits.empty() && input_splits.empty()) {
    if (input.numel() % size_ != 0 || output.numel() != input.numel())
      unsupported(call,
                  "equal splits need input and output of the same number of elements, a "
                  "multiple of the group size " +
                      std::to_string(size_) + " (input " + std::to_string(input.numel()) +
                      ", output " + std::to_string(output.numel()) + ")");
    Elements e = elements(input, call, false);
    e.count /= static_cast<size_t>(size_);
    return enqueue(
        c10d::OpType::ALLTOALL_BASE, call, {output},
        [=](Calls& calls) {
          calls.submit(Call::alltoall(src.data(), dst.data(), e.count, e.type, options));
        },
        [dst] { dst.write_back(); });
  }
  // Uneven splits (rows of the first dimension): one message per peer.
  const std::vector<Block> send = split_rows(input, input_splits, call, "input");
  const std::vector<Block> recv = split_rows(output, output_splits, call, "output");
  return exchange(c10d::OpType::ALLTOALL_BASE, call, {output}, src, send, dst, recv, options);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupChorus::barrier(const c10d::BarrierOptions& opts) {
  const std::string call = "barrier";
  const CallOptions options = call_options(opts.timeout);
  return enqueue(
      c10d::OpType::BARRIER, call, {}, [=](Calls& calls) { calls.submit(Call::barrier(options)); },
      [] {});
}

void ProcessGroupChorus::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const std::string call = "monitored_barrier";
  // Unset (c10d's kUnsetTimeout, negative): torch's default group timeout
  // (default_pg_timeout). Zero is a deadline that has passed already: rank
  // 0 looks once at the reports that have come and names the missing ranks.
  const auto timeout = opts.timeout.count() >= 0
                           ? std::chrono::duration_cast<std::chrono::milliseconds>(opts.timeout)
                           : std::chrono::milliseconds(std::chrono::minutes(30));
  // Its messages carry a tag of their own, so that a user's message never
  // meets them quietly. Their own deadline lies past the barrier's: rank 0
  // names a late rank when the barrier's passes, and aborts, which the
  // others then raise.
  constexpr int kTag = 0x7fff0001;
  CallOptions options;
  options.tag = kTag;
  options.timeout = timeout + std::chrono::minutes(1);
  const int n = size_;
  const int me = rank_;
  c10::intrusive_ptr<c10d::Work> work = enqueue(
      c10d::OpType::BARRIER, call, {},
      [=](Calls& calls) {
        if (me != 0) {
          calls.comm().send(nullptr, 0, DataType::uint8, 0, options);
          calls.comm().recv(nullptr, 0, DataType::uint8, 0, options);
          return;
        }
        std::vector<chorus::Work> reports;
        for (int r = 1; r < n; ++r)
          reports.push_back(calls.comm().recv_async(nullptr, 0, DataType::uint8, r, options));
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        std::vector<int> missing;
        for (int r = 1; r < n; ++r) {
          const auto left = deadline - std::chrono::steady_clock::now();
          chorus::Work& report = reports[static_cast<size_t>(r - 1)];
          if (!report.wait_for(std::max(left, decltype(left)::zero()))) missing.push_back(r);
        }
        if (!missing.empty()) {
          std::string ranks;
          const size_t named = wait_all_ranks ? missing.size() : 1;
          for (size_t i = 0; i < named; ++i) ranks += (i ? ", " : "") + std::to_string(missing[i]);
          // As gloo: a deadline that had passed before rank 0 waited for
          // anyone is rank 0's own timeout; the missing ranks follow.
          const std::string own = timeout.count() == 0
                                      ? "Rank 0 timed out in monitoredBarrier after 0 ms; "
                                      : std::string();
          const std::string what = own + std::string(named > 1 ? "Ranks " : "Rank ") + ranks +
                                   " failed to pass monitoredBarrier in " +
                                   std::to_string(timeout.count()) + " ms";
          // The peers that did report, and the late ones, raise too.
          calls.comm().abort(what);
          throw chorus::Error(chorus::ErrorCode::timeout, "chorus backend: " + call + ": " + what);
        }
        for (int r = 1; r < n; ++r) calls.comm().send(nullptr, 0, DataType::uint8, r, options);
      },
      [] {});
  work->wait(kNoTimeout);
}

}  // namespace chorus::torch_backend
