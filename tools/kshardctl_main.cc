// kshardctl's entry point: argv and the standard streams into runKshardctl.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "tools/kshardctl.h"

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> args(argv + 1, argv + argc);
    return kshard::tools::runKshardctl(args, std::cin, std::cout, std::cerr);
  } catch (const std::exception& e) {
    // Only allocation failure can get here; say so instead of aborting without a word.
    std::cerr << "kshardctl: " << e.what() << "\n";
    return kshard::tools::kExitFailure;
  }
}
