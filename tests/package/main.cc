// Built against an installed rayx: parses resources and asks a head (when one is
// given) for the cluster's status through the public API.
#include <iostream>

#include <rayx/cluster_status.h>
#include <rayx/resources.h>
#include <rayx/version.h>

int main(int argc, char** argv) {
  auto resources = rayx::ParseResourcesJson(R"({"tpu": 4})");
  if (!resources.ok() || resources->at("tpu") != 4) {
    std::cerr << "ParseResourcesJson failed\n";
    return 1;
  }
  std::cout << "rayx " << rayx::kRayxVersion << "\n";
  if (argc == 3) {
    auto status = rayx::QueryClusterStatus(argv[1], argv[2], 5000);
    if (!status.ok()) {
      std::cerr << status.status() << "\n";
      return 1;
    }
    std::cout << "alive nodes: " << status->AliveNodeCount() << "\n";
  }
  return 0;
}
