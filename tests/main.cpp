// The test runner's main: v2 generates it from its header, v3 runs a session of its library.
#if CLUSTERSIM_CATCH2_MAJOR >= 3
#include <catch2/catch_session.hpp>

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
