// Helpers for calls on their way to a worker.
#include "runtime/task.h"

#include <memory>

#include "runtime/object_table.h"

namespace rayx::detail {

void FailTask(ObjectTable& objects, const Task& task, const std::string& type,
              const std::string& message, const std::string& node) {
  objects.Complete(ObjectTable::Completion{
      task.object_id, nullptr,
      std::make_shared<ErrorInfo>(ErrorInfo{type, message, task.DisplayName(), node}), nullptr});
}

}  // namespace rayx::detail
