# chorus top-level entry points. `make demo` and `make test` each install what is
# missing, configure into build/, build, then run.
#   make test                  the whole suite through ctest, then a short run of
#                              every fuzz target (build-fuzz/, FUZZ_SECONDS each)
#   make test SANITIZE=address ASan+UBSan build in build-address/
#   make test SANITIZE=thread  TSan build in build-thread/
#   make demo                  chorus-perf: AllReduce on 4 local ranks over shared memory, every algorithm
#   make bench                 the benchmark ledger (bench/ledger.py): every promised figure
#                              against its anchor -> bench/ledger/<commit>.json (<= 60 min here)
#   make bench QUICK=1         its quick subset (<= 10 min here)
#   make fuzz                  the libFuzzer targets of fuzz/ (clang) in build-fuzz/fuzz/
#   make format                clang-format every C++ source in place (.clang-format)
#   make format-check          fails, naming the lines, where a source is not formatted
SANITIZE ?=
BUILD_TYPE ?= Release
BUILD_DIR ?= $(if $(SANITIZE),build-$(SANITIZE),build)
JOBS ?= $(shell nproc)
CTEST_ARGS ?=
FUZZ_DIR ?= build-fuzz
FUZZ_SECONDS ?= 5
# Under ASan and TSan an allocation too large for any machine returns null (as malloc
# does) instead of aborting, so that the tests of chorus's out-of-memory
# errors run there too.
export ASAN_OPTIONS ?= allocator_may_return_null=1
export TSAN_OPTIONS ?= allocator_may_return_null=1

.PHONY: all deps configure build fuzz test demo bench install clean format format-check

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHORUS_SANITIZE=$(SANITIZE) > /dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# clang with ASan + UBSan + libFuzzer; only the library and fuzz/ are built there.
fuzz: deps
	@cmake -S . -B $(FUZZ_DIR) -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Release \
	  -DCMAKE_CXX_FLAGS=-gline-tables-only -DCHORUS_FUZZ=ON -DCHORUS_FUZZ_SECONDS=$(FUZZ_SECONDS) > /dev/null
	@cmake --build $(FUZZ_DIR) -j $(JOBS)

# Both suites run, so that a failure in the first does not hide the second.
test: build fuzz
	@status=0; \
	  (cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)) || status=1; \
	  (cd $(FUZZ_DIR) && ctest --output-on-failure -j $(JOBS)) || status=1; \
	  exit $$status

# One rank per core (at least 2): chorus at its best on this host.
DEMO_RANKS := $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -ge 2 ] 2>/dev/null || n=2; echo $$n)
demo: build
	@$(BUILD_DIR)/tools/chorus-perf allreduce --ranks $(DEMO_RANKS) --transport shm -b 8 -e 64M -a all

# The ledger holds /tmp/chorus-bench.lock while it measures, so that no two
# benchmarks run at once on this host (whoever benchmarks here takes it too).
QUICK ?=
BENCH_LOCK ?= /tmp/chorus-bench.lock
bench: configure
	@scripts/install-deps.sh libopenmpi-dev mpich libmpich-dev
	@cmake --build $(BUILD_DIR) -j $(JOBS) --target ledger-tools
	@BUILD_DIR=$(abspath $(BUILD_DIR)) flock $(BENCH_LOCK) \
	  /usr/bin/python3 bench/ledger.py --verbose $(if $(filter-out 0,$(QUICK)),--quick)

install: build
	@cmake --install $(BUILD_DIR) --prefix $(or $(PREFIX),/usr/local)

CXX_SOURCES = $$(git ls-files '*.h' '*.cc')
format: deps
	@clang-format -i $(CXX_SOURCES)

format-check: deps
	@clang-format --dry-run -Werror $(CXX_SOURCES)

clean:
	rm -rf build build-address build-thread build-python python/chorus.egg-info $(FUZZ_DIR)
