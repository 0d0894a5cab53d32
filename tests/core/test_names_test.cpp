// The suite's own hygiene: ctest runs each test case alone by its name,
// and CMake splits names at ';' (the halves match no test case, and before
// --warn NoTests such an entry passed with nothing run).
#include <catch2/catch.hpp>

TEST_CASE("every test's name can be run alone through ctest", "[tests]") {
  const auto& all = Catch::getRegistryHub().getTestCaseRegistry().getAllTests();
  CHECK(all.size() > 200);
  for (const auto& t : all) {
    INFO(t.name);
    CHECK(t.name.find(';') == std::string::npos);
  }
}
