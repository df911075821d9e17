// The dashboard's pages, scripts and styles, compiled into the head from
// scheduler/web/assets/ (cmake/embed_assets.cmake): no build step, no files
// to install.
#pragma once

#include <string_view>

namespace rayx::web {

struct StaticAsset {
  std::string_view content_type;
  std::string_view body;
};

// The asset served at `path` ("/index.html"), or nullptr.
const StaticAsset* FindStaticAsset(std::string_view path);

}  // namespace rayx::web
