// A C++ driver for the `rayx job submit` tests. Modes (argv[1]):
//   tpu      runs a task that needs {"tpu": 1}: only a node without this file
//            has tpu, so the worker there must get the program from the job's
//            working directory package; prints where it ran.
//   keep     creates the detached actor "model" holding 41 and adds 1.
//   use      calls the detached actor "model" (from an earlier job) again.
//   sleep    starts an actor, prints its pid and sleeps (for job stop / crash).
#include <rayx/rayx.h>

#include <unistd.h>

#include <chrono>
#include <iostream>
#include <string>
#include <thread>

std::string WhereAmI() { return std::string(std::getenv("RAYX_NODE_IP")) + " " + std::to_string(getpid()); }
int Pid() { return getpid(); }

class Model {
 public:
  static Model* Create(int v) { return new Model(v); }
  int Add(int x) { return value_ += x; }
  int Pid() { return getpid(); }

 private:
  explicit Model(int v) : value_(v) {}
  int value_;
};

RAYX_REMOTE(WhereAmI, Pid, Model::Create, &Model::Add, &Model::Pid);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);
  std::string mode = argc > 1 ? argv[1] : "";
  int code = 0;
  if (mode == "tpu") {
    auto where = rayx::Task(WhereAmI).SetResources({{"tpu", 1}}).Remote().Get();
    std::cout << "tpu task ran on " << *where << std::endl;
  } else if (mode == "keep") {
    auto model = rayx::Actor(Model::Create).SetName("model").SetLifetime(rayx::Detached).Remote(41);
    std::cout << "model value " << *model.Task(&Model::Add).Remote(1).Get() << std::endl;
  } else if (mode == "use") {
    auto model = rayx::GetActor<Model>("model");
    std::cout << "model value " << *model.Task(&Model::Add).Remote(1).Get() << std::endl;
  } else if (mode == "sleep") {
    auto actor = rayx::Actor(Model::Create).Remote(0);
    std::cout << "actor pid " << *actor.Task(&Model::Pid).Remote().Get() << std::endl;
    std::cout << "driver pid " << getpid() << std::endl;
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));
  } else {
    std::cerr << "unknown mode " << mode << std::endl;
    code = 2;
  }
  rayx::Shutdown();
  return code;
}
