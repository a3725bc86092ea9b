"""Packages python/offsim with the library CMake built (cli/api.h): the package runs the
`offsim` command's own code, so it is installed from a build, never built apart from it.
Beside it python/offsim_torch, pure Python over torch (the recorder and the GPU harnesses).

The library is OFFSIM_LIBRARY, or build/python/offsim/liboffsim.so beside this folder (the
README's `cmake --build build`)."""

import os
import shutil

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


class BuildPy(build_py):
    def run(self):
        super().run()
        lib = os.environ.get("OFFSIM_LIBRARY") or os.path.join(HERE, "..", "build", "python", "offsim", "liboffsim.so")
        if not os.path.isfile(lib):
            raise SystemExit("offsim: %s: no such library; build it first (cmake --build build) or set OFFSIM_LIBRARY" % lib)
        shutil.copy(lib, os.path.join(self.build_lib, "offsim", "liboffsim.so"))


class BinaryDistribution(Distribution):
    """A wheel for this platform: it carries a shared library."""

    def has_ext_modules(self):
        return True


setup(
    name="offsim",
    version="0.1.0",
    description="Activation-offload scheduling simulator: the offsim commands as pandas DataFrames",
    packages=["offsim", "offsim_torch"],
    python_requires=">=3.9",
    cmdclass={"build_py": BuildPy},
    distclass=BinaryDistribution,
)
