// Helpers for calls on their way to a worker.
#include "runtime/task.h"

#include <memory>

#include "runtime/object_table.h"

namespace rayx::detail {

void FailTask(ObjectTable& objects, const Task& task, ErrorInfo error) {
  objects.Complete(ObjectTable::Completion{
      task.object_id, nullptr, std::make_shared<ErrorInfo>(std::move(error)), nullptr});
}

void FailTask(ObjectTable& objects, const Task& task, protocol::TaskErrorKind kind,
              const std::string& message, const std::string& node) {
  objects.Complete(ObjectTable::Completion{
      task.object_id, nullptr,
      std::make_shared<ErrorInfo>(ErrorInfo::Of(kind, message, task.DisplayName(), node)),
      nullptr});
}

}  // namespace rayx::detail
