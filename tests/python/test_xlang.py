"""Calls between languages: Python -> C++ (rayx.cpp_function) and C++ ->
Python (rayx::PyFunction), values as msgpack."""

import os
import subprocess
import sys

import pytest

from conftest import driver_env

PROGRAM = os.environ.get("RAYX_XLANG_PROGRAM", "")
needs_program = pytest.mark.skipif(not PROGRAM, reason="RAYX_XLANG_PROGRAM (the C++ test "
                                   "program, built by CMake) is not set")


@needs_program
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


@needs_program
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
