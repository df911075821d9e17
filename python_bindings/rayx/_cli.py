"""The `rayx` command of a pip-installed rayx: runs the packaged rayx binary
(rayx/bin/rayx, beside rayx-head and rayx-agent)."""

import os
import sys


def binary_dir():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def main():
    cli = os.path.join(binary_dir(), "rayx")
    if not os.access(cli, os.X_OK):
        sys.stderr.write(f"rayx: {cli} is missing: this rayx package was not built with its "
                         "binaries (install it with `pip install .` from the repository)\n")
        return 127
    os.execv(cli, [cli] + sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
