// A rayx C++ program for the cross-language tests: its functions are called
// from Python (rayx.cpp_function), and with --call-python it is a C++ driver
// calling Python functions (rayx::PyFunction).
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "rayx/rayx.h"

int Square(int x) { return x * x; }
std::string Greet(std::string name) { return "hello " + name; }
std::map<std::string, std::vector<double>> Scale(std::map<std::string, std::vector<double>> m,
                                                 double k) {
  for (auto& [name, values] : m) {
    for (auto& v : values) v *= k;
  }
  return m;
}
int Fails(int) { throw std::invalid_argument("C++ refused the input"); }
RAYX_REMOTE(Square, Greet, Scale, Fails);

int main(int argc, char** argv) {
  rayx::Init(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "--call-python") {
    int doubled = *rayx::PyFunction<int>("xlang_module", "double_it").Remote(21).Get();
    std::cout << "PYTHON SAID " << doubled << std::endl;
    auto words = *rayx::PyFunction<std::vector<std::string>>("xlang_module", "split")
                      .Remote(std::string("a b c"))
                      .Get();
    std::cout << "PYTHON SPLIT " << words.size() << " " << words[2] << std::endl;
    try {
      rayx::PyFunction<int>("xlang_module", "fail").Remote(1).Get();
      std::cout << "PYTHON DID NOT FAIL" << std::endl;
    } catch (const rayx::TaskError& e) {
      std::cout << "PYTHON FAILED " << e.what() << std::endl;
    }
  }
  rayx::Shutdown();
  return 0;
}
