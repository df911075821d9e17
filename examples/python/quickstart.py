"""rayx from Python: tasks, an actor, a zero-copy numpy object, an error.

    rayx start --head             # or let rayx.init() start a private cluster
    python examples/python/quickstart.py
"""
import os

import numpy as np

import rayx


@rayx.remote
def square(x):
    return x * x


@rayx.remote
def node_of(_):
    return os.environ.get("RAYX_NODE_IP")


@rayx.remote
class Counter:
    def __init__(self):
        self.n = 0

    def add(self, k):
        self.n += k
        return self.n


@rayx.remote
def column_sums(matrix):
    return matrix.sum(axis=0)


@rayx.remote
def fails():
    raise ValueError("a remote ValueError")


def main():
    rayx.init()
    print("squares:", rayx.get([square.remote(i) for i in range(8)]))
    print("nodes used:", sorted(set(rayx.get([node_of.options(scheduling_strategy="SPREAD")
                                              .remote(i) for i in range(6)]))))
    c = Counter.remote()
    print("counter:", rayx.get([c.add.remote(k) for k in range(5)])[-1])
    m = np.arange(4_000_000, dtype=np.float64).reshape(1000, 4000)
    ref = rayx.put(m)                              # 32 MB, written once into shared memory
    view = rayx.get(ref)                           # read-only, maps the store in place
    print("zero-copy view:", view.shape, "writeable:", view.flags.writeable)
    print("column sums match:", bool(np.allclose(rayx.get(column_sums.remote(ref)), m.sum(axis=0))))
    try:
        rayx.get(fails.remote())
    except ValueError as e:                        # the original class still catches it
        print("caught:", type(e).__name__, str(e).splitlines()[0])
    print("resources:", {k: v for k, v in rayx.cluster_resources().items() if k != "memory"})
    rayx.shutdown()


if __name__ == "__main__":
    main()
