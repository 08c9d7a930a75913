"""Builds the Python package chorus with the project's CMake build.

    pip install --no-build-isolation .     # into the active environment
    pip wheel --no-build-isolation .       # a wheel for environments without a compiler

CMake builds libchorus (linked statically into every module and tool), the
numpy binding chorus._chorus, the torch.distributed backend
chorus.torch._backend (when torch is found; docs/PYTHON.md) and the tools,
which the package ships in chorus/bin/ behind console scripts. The version is
CMakeLists.txt's project(VERSION).

Environment:
  CHORUS_BUILD_DIR  the CMake build directory (default: build-python/ in the
                    source tree). An existing one, configured from this source
                    tree, is configured and built again (only what changed)
                    with its own settings.
  CMAKE_ARGS        more arguments for CMake's configure step, e.g.
                    -DCHORUS_BUILD_TORCH=OFF for the numpy binding alone.
  CMAKE_BUILD_PARALLEL_LEVEL  compile jobs (default: the number of cores).
ccache, when installed, compiles (CMakeLists.txt, CHORUS_CCACHE).
"""

import os
import re
import shlex
import shutil
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
TOOLS = ["chorus-run", "chorus-perf", "chorus-sim", "chorus-verify", "chorus-soak"]
# extension -> (CMake target, where CMake leaves it under the build directory)
EXTENSIONS = {
    "chorus._chorus": ("_chorus", "python/chorus"),
    "chorus.torch._backend": ("_backend", "python/chorus/torch"),
}


def project_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*chorus\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text)
    if not m:
        raise RuntimeError("setup.py: no project(chorus VERSION x.y.z) in CMakeLists.txt")
    return m.group(1)


def cache_value(cache, name):
    """The value of `name` in CMakeCache.txt (None when absent)."""
    m = re.search(rf"^{re.escape(name)}:[A-Z]+=(.*)$", cache, re.MULTILINE)
    return m.group(1) if m else None


class CMakeBuild(build_ext):
    """Configures and builds the CMake project once, then copies its modules
    and tools into the package."""

    def run(self):
        if shutil.which("cmake") is None:
            raise RuntimeError("chorus: building needs cmake (Debian: apt-get install cmake ninja-build g++; "
                               "scripts/install-deps.sh installs everything chorus needs)")
        build = Path(os.environ.get("CHORUS_BUILD_DIR") or ROOT / "build-python").resolve()
        self.configure(build)
        targets = ["_chorus", *TOOLS]
        torch = cache_value((build / "CMakeCache.txt").read_text(), "CHORUS_TORCH_BACKEND")
        if torch == "ON":
            targets.append("_backend")
        else:
            print("chorus: the CMake build has no torch backend (torch not found, or "
                  "CHORUS_BUILD_TORCH=OFF; see its configure output): the package gets the numpy "
                  "binding alone, and `import chorus.torch` says so", file=sys.stderr)
            self.extensions = [e for e in self.extensions if e.name != "chorus.torch._backend"]
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL") or str(os.cpu_count() or 1)
        self.spawn(["cmake", "--build", str(build), "-j", jobs, "--target", *targets])

        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        for ext in self.extensions:
            target, where = EXTENSIONS[ext.name]
            built = build / where / (target + suffix)
            if not built.is_file():
                found = sorted(p.name for p in (build / where).glob(target + ".*"))
                raise RuntimeError(
                    f"chorus: {built} was not built; the build directory has {found or 'nothing'} "
                    f"for {target}: it was configured for another interpreter than {sys.executable} "
                    f"(Python3_EXECUTABLE in {build / 'CMakeCache.txt'})")
            dest = Path(self.get_ext_fullpath(ext.name))
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(built, dest)

        # The tools, with the layout an install prefix has (chorus-sim finds its
        # gnuplot script as ../share/chorus/plot_sim.gp from its own directory).
        package = Path(self.get_ext_fullpath("chorus._chorus")).parent
        (package / "bin").mkdir(exist_ok=True)
        for tool in TOOLS:
            shutil.copy2(build / "tools" / tool, package / "bin" / tool)
        (package / "share" / "chorus").mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / "scripts" / "plot_sim.gp", package / "share" / "chorus" / "plot_sim.gp")

    def configure(self, build):
        cache = build / "CMakeCache.txt"
        extra = shlex.split(os.environ.get("CMAKE_ARGS", ""))
        if cache.is_file():
            source = cache_value(cache.read_text(), "CMAKE_HOME_DIRECTORY")
            if source is None or Path(source).resolve() != ROOT:
                raise RuntimeError(f"chorus: the build directory {build} was configured from {source}, "
                                   f"not from {ROOT}; name another one in CHORUS_BUILD_DIR")
            python = cache_value(cache.read_text(), "Python3_EXECUTABLE")
            if python and not Path(python).exists():  # a virtual environment since removed
                extra.append(f"-DPython3_EXECUTABLE={sys.executable}")
            # Configured again (seconds), so that a torch installed since is found.
            self.spawn(["cmake", str(build), *extra])
            return
        args = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                f"-DPython3_EXECUTABLE={sys.executable}",
                "-DCHORUS_BUILD_TESTS=OFF", "-DCHORUS_BUILD_BENCH=OFF"]
        if shutil.which("ninja"):
            args += ["-G", "Ninja"]
        self.spawn(args + extra)


setup(
    version=project_version(),
    package_dir={"": "python"},
    packages=["chorus", "chorus.torch"],
    include_package_data=False,
    ext_modules=[Extension(name, sources=[]) for name in EXTENSIONS],
    cmdclass={"build_ext": CMakeBuild},
    # setuptools' own build files beside CMake's, not in build/ (make's).
    options={"build": {"build_base": "build-python/setuptools"}},
    zip_safe=False,
)
