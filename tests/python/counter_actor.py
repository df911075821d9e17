"""A counter actor that reports its process, shared by tests that kill and
restart actors. A module of its own so that a separate driver imports it too;
workers import it by reference through the driver's import path."""

import os


class Counter:
    def __init__(self, start):
        self.n = start

    def add(self, k):
        self.n += k
        return self.n

    def pid(self):
        return os.getpid()
