// Placeholder replaced by the microbenchmark implementation.
#include <rayx/rayx.h>
int main(int argc, char** argv) {
  rayx::Init(argc, argv);
  rayx::Shutdown();
  return 0;
}
