// The one source of ios_test_pch (tests/CMakeLists.txt): CMake builds the
// precompiled header every test target reuses alongside it.
