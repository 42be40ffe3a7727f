# Target helpers: every library is declared as charge_outbox_<name> with the alias
# charge_outbox::<name>, and is always linked through the alias so a typo fails at configure time.

set(CHARGE_OUTBOX_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wold-style-cast
    -Wcast-align -Woverloaded-virtual -Wconversion -Wsign-conversion
    -Wimplicit-fallthrough -Wswitch-enum
    # Designated initializers that leave members at their defaults are the point of them.
    -Wno-missing-field-initializers
    # GCC 12 misreads Asio's awaitable frame allocator as a new/delete mismatch (GCC bug 109224).
    -Wno-mismatched-new-delete)

function(charge_outbox_apply_options target)
  target_compile_options(${target} PRIVATE ${CHARGE_OUTBOX_WARNINGS})
  if(CHARGE_OUTBOX_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(CHARGE_OUTBOX_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
  if(CHARGE_OUTBOX_FAILPOINTS)
    target_compile_definitions(${target} PRIVATE CHARGE_OUTBOX_FAILPOINTS=1)
  endif()
endfunction()

# charge_outbox_cc_library(NAME name SRCS ... [PUBLIC_DEPS ...] [PRIVATE_DEPS ...] [INCLUDE_DIR dir])
function(charge_outbox_cc_library)
  cmake_parse_arguments(ARG "" "NAME;INCLUDE_DIR" "SRCS;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  set(target charge_outbox_${ARG_NAME})
  add_library(${target} STATIC ${ARG_SRCS})
  add_library(charge_outbox::${ARG_NAME} ALIAS ${target})
  if(ARG_INCLUDE_DIR)
    target_include_directories(${target} PUBLIC ${ARG_INCLUDE_DIR})
  endif()
  target_link_libraries(${target} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  charge_outbox_apply_options(${target})
endfunction()

# charge_outbox_executable(NAME binary-name SRCS ... DEPS ...)
function(charge_outbox_executable)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS})
  charge_outbox_apply_options(${ARG_NAME})
  install(TARGETS ${ARG_NAME} RUNTIME DESTINATION bin)
endfunction()

# charge_outbox_service(NAME binary-name [SRCS extra...] [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# One folder under services/: the library charge_outbox::<binary name, '-' as '_'>_app from every
# src/*.cpp (globbed, as common/ is; the tests link it too) plus SRCS, and the binary from main.cpp.
function(charge_outbox_service)
  cmake_parse_arguments(ARG "" "NAME" "SRCS;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  string(REPLACE "-" "_" library ${ARG_NAME})
  set(library ${library}_app)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/src/*.cpp)
  charge_outbox_cc_library(
    NAME ${library}
    INCLUDE_DIR ${CMAKE_CURRENT_SOURCE_DIR}/src
    SRCS ${sources} ${ARG_SRCS}
    PUBLIC_DEPS charge_outbox::common ${ARG_PUBLIC_DEPS}
    PRIVATE_DEPS ${ARG_PRIVATE_DEPS})
  charge_outbox_executable(NAME ${ARG_NAME} SRCS ${CMAKE_CURRENT_SOURCE_DIR}/main.cpp DEPS charge_outbox::${library})
endfunction()

# charge_outbox_test(NAME name LABEL unit|integration|e2e SRCS ... DEPS ...)
# The label must match the file suffix: *_test.cpp unit, *_pgtest.cpp / *_kafkatest.cpp
# integration, *_e2etest.cpp e2e.
function(charge_outbox_test)
  cmake_parse_arguments(ARG "" "NAME;LABEL" "SRCS;DEPS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SRCS})
  target_link_libraries(${ARG_NAME} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gmock GTest::gtest_main)
  charge_outbox_apply_options(${ARG_NAME})
  gtest_discover_tests(${ARG_NAME}
    PROPERTIES LABELS ${ARG_LABEL}
    DISCOVERY_TIMEOUT 30)
endfunction()

# charge_outbox_embed_migrations(OUTPUT <var> DIR <folder> NAMESPACE <ns> FUNCTION <name>)
# Generates a source defining `const std::vector<db::Migration>& <ns>::<name>()` from the folder's
# NNNN_name.sql files (cmake/EmbedMigrations.cmake), so a binary carries exactly the schema it was built
# for; sets <var> to the generated file, to add to a library's SRCS.
function(charge_outbox_embed_migrations)
  cmake_parse_arguments(ARG "" "OUTPUT;DIR;NAMESPACE;FUNCTION" "" ${ARGN})
  file(GLOB files CONFIGURE_DEPENDS ${ARG_DIR}/*.sql)
  set(generated ${CMAKE_CURRENT_BINARY_DIR}/generated/${ARG_FUNCTION}.cpp)
  add_custom_command(
    OUTPUT ${generated}
    COMMAND ${CMAKE_COMMAND} -DMIGRATIONS_DIR=${ARG_DIR} -DOUTPUT=${generated}
            -DNAMESPACE=${ARG_NAMESPACE} -DFUNCTION=${ARG_FUNCTION}
            -P ${PROJECT_SOURCE_DIR}/cmake/EmbedMigrations.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/EmbedMigrations.cmake
    COMMENT "Embedding the migrations of ${ARG_DIR}")
  set(${ARG_OUTPUT} ${generated} PARENT_SCOPE)
endfunction()
