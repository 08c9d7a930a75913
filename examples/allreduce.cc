// A complete chorus program: four ranks as threads sum a vector.
//   g++ -std=c++20 allreduce.cc $(pkg-config --cflags --libs chorus)
#include <chorus/chorus.h>

#include <cstdio>
#include <vector>

int main() {
  chorus::testing::run_ranks(4, [](chorus::Communicator& comm) {
    std::vector<float> grad(1 << 20, static_cast<float>(comm.rank() + 1));
    comm.allreduce(grad.data(), grad.data(), grad.size(), chorus::DataType::float32,
                   chorus::ReduceOp::sum);
    if (comm.rank() == 0) std::printf("sum = %g (expect 10)\n", grad[0]);
    if (grad[0] != 10.0f) throw std::runtime_error("wrong sum");
  });
  return 0;
}
