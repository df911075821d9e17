"""Calls between languages: Python -> C++ (rayx.cpp_function) and C++ ->
Python (rayx::PyFunction), values as msgpack."""

import os
import subprocess
import sys

import pytest

from conftest import RAYX_BIN_DIR, driver_env

# The C++ side, built by CMake beside the tests (ctest names it; by hand it is
# found next to the build's bin/).
PROGRAM = os.environ.get("RAYX_XLANG_PROGRAM") or os.path.join(
    os.path.dirname(RAYX_BIN_DIR or "build/bin"), "tests", "xlang_program")


@pytest.fixture(autouse=True)
def _program_built():
    assert os.access(PROGRAM, os.X_OK), (
        f"the C++ test program {PROGRAM} is missing: build it (cmake --build build --target "
        "xlang_program) or set RAYX_XLANG_PROGRAM")


def test_python_calls_cpp_functions(rayx_mod):
    rayx = rayx_mod
    square = rayx.cpp_function("Square", executable=PROGRAM)
    assert rayx.get([square.remote(i) for i in range(5)]) == [0, 1, 4, 9, 16]
    assert rayx.get(rayx.cpp_function("Greet", PROGRAM).remote("rayx")) == "hello rayx"
    scaled = rayx.get(rayx.cpp_function("Scale", PROGRAM).remote({"w": [1.0, 2.5]}, 2.0))
    assert scaled == {"w": [2.0, 5.0]}
    with pytest.raises(rayx.exceptions.RayxError, match="C\\+\\+ refused the input"):
        rayx.get(rayx.cpp_function("Fails", PROGRAM).remote(1), timeout=30)
    with pytest.raises(TypeError, match=r"cannot pass a set \(at argument 0 of Square\)"):
        square.remote({1, 2})
    with pytest.raises(ValueError, match="not an executable"):
        rayx.cpp_function("Square", executable="/nonexistent/program")


def test_cpp_calls_python_functions(cluster):
    env = driver_env(cluster)
    env["RAYX_PYTHON"] = sys.executable
    here = os.path.dirname(os.path.abspath(__file__))
    env["PYTHONPATH"] = os.pathsep.join([env.get("PYTHONPATH", ""), here])
    r = subprocess.run([PROGRAM, "--call-python"], capture_output=True, text=True, timeout=120,
                       env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PYTHON SAID 42" in r.stdout
    assert "PYTHON SPLIT 3 c" in r.stdout
    assert "PYTHON FAILED" in r.stdout and "ZeroDivisionError" in r.stdout, r.stdout
