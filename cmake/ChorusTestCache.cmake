# Hermetic tests: no test reads or writes the user's calibration cache
# ($XDG_CACHE_HOME/chorus, else ~/.cache/chorus; src/tune/calibration_cache.h).
# Every test gets XDG_CACHE_HOME=<build>/test-cache and requires the fixture
# chorus_test_cache, whose setup test (test_cache.wipe) empties that directory
# first, so that a ctest run starts from no cached calibration whatever an
# earlier run left behind (ctest -R adds the setup test by itself).
set(CHORUS_TEST_CACHE_HOME ${PROJECT_BINARY_DIR}/test-cache)
set(CHORUS_TEST_CACHE_FIXTURE chorus_test_cache)
# For gtest_discover_tests(... PROPERTIES ${CHORUS_TEST_CACHE_PROPERTIES}).
set(CHORUS_TEST_CACHE_PROPERTIES
    ENVIRONMENT "XDG_CACHE_HOME=${CHORUS_TEST_CACHE_HOME}"
    FIXTURES_REQUIRED ${CHORUS_TEST_CACHE_FIXTURE})

# Adds the setup test; called once, where testing is enabled.
function(chorus_test_cache_setup)
  add_test(NAME test_cache.wipe
           COMMAND sh -c "rm -rf \"$1\" && mkdir -p \"$1\"" sh ${CHORUS_TEST_CACHE_HOME})
  set_tests_properties(test_cache.wipe PROPERTIES FIXTURES_SETUP ${CHORUS_TEST_CACHE_FIXTURE})
endfunction()

# Gives every test added so far in the calling directory (add_test, not the
# discovered gtest cases) the cache directory and the fixture; called at the
# end of each CMakeLists.txt that adds tests (set_property(TEST) reaches only
# the tests of its own directory).
function(chorus_hermetic_tests)
  get_property(tests DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} PROPERTY TESTS)
  foreach(t IN LISTS tests)
    if(t STREQUAL "test_cache.wipe")
      continue()
    endif()
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT "XDG_CACHE_HOME=${CHORUS_TEST_CACHE_HOME}")
    set_property(TEST ${t} APPEND PROPERTY FIXTURES_REQUIRED ${CHORUS_TEST_CACHE_FIXTURE})
  endforeach()
endfunction()
