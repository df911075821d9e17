// Values that cross between Python and C++ (rayx.cpp_function,
// rayx::PyFunction) as msgpack, bounded in both directions.
#pragma once

#include <pybind11/pybind11.h>

#include <string>

namespace rayx::python {

// Encodes `value`: None, bool, int (64-bit), float, str, bytes, bytearray,
// list, tuple and dict of these. `what` names the value in errors ("argument 0
// of Square"), which also give the path inside it ("argument 0 of Square[2]
// key 'x'"). Raises TypeError for any other type, ValueError for an int over 64
// bits, a container holding itself, nesting deeper than
// detail::kMaxValueDepth, or a container or string too large for msgpack.
pybind11::bytes MsgpackDumps(pybind11::handle value, const std::string& what);

// Decodes one msgpack value filling the contiguous buffer `data`: arrays become
// lists (tuples where they are map keys), maps dicts, str str, bin bytes.
// Raises ValueError when the bytes are not one msgpack value within
// detail::UnpackLimits{} (truncated, trailing bytes, too deep, headers
// declaring more than the bytes hold), TypeError for a value with no Python
// equivalent (ext) or a map used as a map key, BufferError for a buffer that is
// not contiguous.
pybind11::object MsgpackLoads(pybind11::handle data);

}  // namespace rayx::python
