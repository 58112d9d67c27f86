// Writes the tiny two-layer transformer used by the runtime tests to a .vrp file, so that
// `vrun info` has a program to show before real model importers exist.
#include <cstdio>

#include "tests/runtime/tiny_transformer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_demo_program OUT.vrp\n");
    return 2;
  }
  auto prog = vrun::test::build_tiny_transformer(vrun::test::make_tiny_weights({}, 1));
  if (!prog.is_ok()) {
    std::fprintf(stderr, "make_demo_program: %s\n", prog.status().to_string().c_str());
    return 1;
  }
  const vrun::Status s = vrun::write_program(**prog, argv[1]);
  if (!s.is_ok()) {
    std::fprintf(stderr, "make_demo_program: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("wrote %s\n", argv[1]);
  return 0;
}
