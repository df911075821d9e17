"""Ray's ray.cloudpickle: the cloudpickle rayx serializes with (Debian's
python3-cloudpickle, or the one installed beside rayx). `import
rayx.cloudpickle` gives that module itself."""

import sys

import cloudpickle as _cloudpickle

sys.modules[__name__] = _cloudpickle
