#include "protocol/codec.h"
#include <gtest/gtest.h>
using namespace rayx::protocol;
TEST(P, P) {
  std::string bytes(10000, (char)0x91); bytes += (char)0xc0;
  std::cout << Decode<Envelope>(bytes).status() << "\n";
  const char a[] = {(char)0xdd, '\xff', '\xff', '\xff', '\xff', 1, 2, 3};
  std::cout << Decode<Envelope>(std::string_view(a, 8)).status() << "\n";
  const char m[] = {(char)0xdf, '\xff', '\xff', '\xff', '\xff', 1, 2};
  std::cout << Decode<Envelope>(std::string_view(m, 7)).status() << "\n";
  const char s[] = {(char)0xdb, '\xff', '\xff', '\xff', '\xff', 'a'};
  std::cout << Decode<Envelope>(std::string_view(s, 6)).status() << "\n";
  const char b[] = {(char)0xc6, '\x7f', '\xff', '\xff', '\xff', 'a'};
  std::cout << Decode<Envelope>(std::string_view(b, 6)).status() << "\n";
  const char e[] = {(char)0xd4, 1, 2};
  std::cout << Decode<Envelope>(std::string_view(e, 3)).status() << "\n";
}
