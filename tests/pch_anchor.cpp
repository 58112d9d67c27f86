// The translation unit that compiles the test binaries' precompiled header (tests/CMakeLists.txt).
