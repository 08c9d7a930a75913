# chorus top-level entry points. `make demo` and `make test` each install what is
# missing, configure into build/, build, then run.
#   make test                  the whole suite through ctest
#   make test SANITIZE=address ASan+UBSan build in build-address/
#   make test SANITIZE=thread  TSan build in build-thread/
#   make demo                  chorus-perf: AllReduce on 4 local ranks over shared memory, every algorithm
SANITIZE ?=
BUILD_TYPE ?= Release
BUILD_DIR ?= $(if $(SANITIZE),build-$(SANITIZE),build)
JOBS ?= $(shell nproc)
CTEST_ARGS ?=

.PHONY: all deps configure build test demo install clean format

all: build

deps:
	@scripts/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD_DIR) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DCHORUS_SANITIZE=$(SANITIZE) > /dev/null

build: configure
	@cmake --build $(BUILD_DIR) -j $(JOBS)

test: build
	@cd $(BUILD_DIR) && ctest --output-on-failure -j $(JOBS) $(CTEST_ARGS)

demo: build
	@$(BUILD_DIR)/tools/chorus-perf allreduce --ranks 4 --transport shm -b 8 -e 64M -a all

install: build
	@cmake --install $(BUILD_DIR) --prefix $(or $(PREFIX),/usr/local)

format:
	@clang-format -i $$(git ls-files '*.h' '*.cc')

clean:
	rm -rf build build-address build-thread
