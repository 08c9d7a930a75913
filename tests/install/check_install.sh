#!/usr/bin/env bash
# Installs chorus from a build tree into a temporary prefix, then builds and
# runs a user program against it twice: through pkg-config and through
# find_package(chorus CONFIG).
#   check_install.sh BUILD_DIR SOURCE_DIR [EXTRA_FLAGS]
# EXTRA_FLAGS reach the user program's compile and link (a sanitizer build of
# chorus needs the sanitizer runtime in the program too).
set -euo pipefail
build=$1
src=$2
extra=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > /dev/null
test -f "$tmp/prefix/include/chorus/chorus.h"

# 1. pkg-config, exactly as the README shows it.
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
g++ -std=c++20 $extra "$src/examples/allreduce.cc" -o "$tmp/app_pc" $(pkg-config --cflags --libs chorus)
"$tmp/app_pc" | grep -q "sum = 10"

# 2. CMake package.
mkdir -p "$tmp/user"
cat > "$tmp/user/CMakeLists.txt" <<CM
cmake_minimum_required(VERSION 3.25)
project(user CXX)
find_package(chorus CONFIG REQUIRED)
add_executable(app $src/examples/allreduce.cc)
target_link_libraries(app PRIVATE chorus::chorus)
CM
cmake -S "$tmp/user" -B "$tmp/user/build" -G Ninja -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_CXX_FLAGS="$extra" -DCMAKE_EXE_LINKER_FLAGS="$extra" > /dev/null
cmake --build "$tmp/user/build" > /dev/null
"$tmp/user/build/app" | grep -q "sum = 10"

# 3. The installed tools run from the prefix alone: chorus-sim --plot finds
# its gnuplot script under share/chorus (not in a source tree).
test -f "$tmp/prefix/share/chorus/plot_sim.gp"
(cd "$tmp" && "$tmp/prefix/bin/chorus-sim" allreduce --ranks 8 -b 8 -e 1M -f 64 \
   --alpha 2us --beta 10GB/s --plot "$tmp/sim.svg" > "$tmp/sim.out")
grep -q "ring" "$tmp/sim.out"
grep -q "<svg" "$tmp/sim.svg"
echo "install check: pkg-config and find_package builds both ran; installed chorus-sim --plot drew an SVG"
