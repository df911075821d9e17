// rayx._core.collective: the collective groups of core/collective for Python.
#include "bindings.h"

namespace rayx::python {

void BindCollective(pybind11::module_& m) {
  pybind11::module_ sub = m.def_submodule("collective", "collective groups over actors");
  (void)sub;
}

}  // namespace rayx::python
