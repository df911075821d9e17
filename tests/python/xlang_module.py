"""Python functions that the C++ program (xlang_program.cc) calls."""


def double_it(x):
    return 2 * x


def split(text):
    return text.split()


def fail(x):
    raise ZeroDivisionError(f"python cannot do this with {x}")
