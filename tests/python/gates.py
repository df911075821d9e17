"""Gates for remote functions in tests: a call that must not finish before the
test says so waits for a file the test creates, with a deadline, so that a
test that fails before opening the gate cannot leave a worker spinning. A
module of its own: workers import it by reference through the driver's import
path (as counter_actor)."""

import os
import time


def wait_for_file(path, timeout=60):
    """Returns "done" once `path` exists; TimeoutError naming it after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the gate {path} was not opened within {timeout} s")
        time.sleep(0.01)
    return "done"
