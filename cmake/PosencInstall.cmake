# Install and export, like fmt: headers (with the generated posenc/version.h),
# the static library (posenc::posenc) and the shared one (posenc::shared, with
# the C API), the CMake package, posenc.pc for pkg-config, the CLI and what it
# reads at run time (share/posenc/: the report's chart library, example
# configs, the committed extrapolation run and the bench baselines, found
# relative to the executable).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(POSENC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/posenc)
# Two export sets: posenc::shared needs only Threads at a consumer's link
# step, posenc::posenc (static) also Highway, nlohmann_json and OpenMP; the package
# config (posenc-config.cmake.in) looks for those only for the static one.
install(TARGETS posenc EXPORT posenc-static-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET posenc_shared)
  install(TARGETS posenc_shared EXPORT posenc-shared-targets
          LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
          RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
          INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
  install(EXPORT posenc-shared-targets NAMESPACE posenc:: DESTINATION ${POSENC_CMAKE_DIR})
  export(EXPORT posenc-shared-targets NAMESPACE posenc::
         FILE ${PROJECT_BINARY_DIR}/posenc-shared-targets.cmake)
endif()
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/posenc
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_BINARY_DIR}/include/posenc/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/posenc)
install(EXPORT posenc-static-targets NAMESPACE posenc:: DESTINATION ${POSENC_CMAKE_DIR})
export(EXPORT posenc-static-targets NAMESPACE posenc::
       FILE ${PROJECT_BINARY_DIR}/posenc-static-targets.cmake)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/posenc-config.cmake.in
  ${PROJECT_BINARY_DIR}/posenc-config.cmake INSTALL_DESTINATION ${POSENC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/posenc-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/posenc-config.cmake
              ${PROJECT_BINARY_DIR}/posenc-config-version.cmake
        DESTINATION ${POSENC_CMAKE_DIR})

# pkg-config: relocatable (prefix found from the .pc file's own directory).
file(RELATIVE_PATH POSENC_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
set(POSENC_PC_OPENMP "")  # the OpenMP runtime of a static link (Workers::kOpenMP)
if(POSENC_WITH_OPENMP)
  foreach(lib IN LISTS OpenMP_CXX_LIB_NAMES)
    if(NOT lib STREQUAL "pthread")
      string(APPEND POSENC_PC_OPENMP "-l${lib} ")
    endif()
  endforeach()
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/posenc.pc.in ${PROJECT_BINARY_DIR}/posenc.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/posenc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The build tree's own .pc (the pkg-config convention: with the build
# directory on PKG_CONFIG_PATH, `pkg-config posenc` picks posenc-uninstalled
# over any installed posenc.pc): headers from the source and build trees,
# libposenc.so where the build put it.
if(TARGET posenc_shared)
  file(GENERATE OUTPUT ${PROJECT_BINARY_DIR}/posenc-uninstalled.pc CONTENT
"libdir=$<TARGET_FILE_DIR:posenc_shared>
includedir=${PROJECT_SOURCE_DIR}/include

Name: posenc (uninstalled, ${PROJECT_BINARY_DIR})
Description: ${PROJECT_DESCRIPTION} (C API: posenc/c.h)
Version: ${PROJECT_VERSION}
Libs: -L\${libdir} -lposenc
Cflags: -I\${includedir} -I${PROJECT_BINARY_DIR}/include
")
endif()

if(TARGET posenc_cli)
  install(TARGETS posenc_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  # share/posenc/: the chart bundles `posenc report` / `posenc plot` inline
  # and the example configs the report draws (cli/report/html.h).
  set(POSENC_DATADIR ${CMAKE_INSTALL_DATADIR}/posenc)
  foreach(bundle vega/build/vega.min.js vega-lite/build/vega-lite.min.js
                 vega-embed/build/vega-embed.min.js)
    if(NOT EXISTS ${PROJECT_SOURCE_DIR}/node_modules/${bundle})
      message(WARNING "node_modules/${bundle} is missing (run scripts/setup.sh): the installed "
                      "posenc report will need POSENC_NODE_MODULES")
    else()
      get_filename_component(dir ${bundle} DIRECTORY)
      install(FILES ${PROJECT_SOURCE_DIR}/node_modules/${bundle}
              DESTINATION ${POSENC_DATADIR}/node_modules/${dir})
    endif()
  endforeach()
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/configs/ DESTINATION ${POSENC_DATADIR}/configs
          FILES_MATCHING PATTERN "*.json")
  # The playground's WebAssembly module, when the wasm preset has built it
  # (cli/report/playground.h; without it the installed report says so).
  install(FILES ${POSENC_WASM_BUILD_DIR}/posenc.js ${POSENC_WASM_BUILD_DIR}/posenc.wasm OPTIONAL
          DESTINATION ${POSENC_DATADIR}/wasm)
  # The evidence base of `posenc choose` (cli/choose_text.h).
  install(FILES ${PROJECT_SOURCE_DIR}/docs/evidence/choose.json
          DESTINATION ${POSENC_DATADIR}/evidence)
  # The committed extrapolation run `posenc report` shows by default
  # (cli/report/html.h DefaultExperimentDir; the report reads results.json).
  install(FILES ${PROJECT_SOURCE_DIR}/docs/experiments/extrapolation/results.json
          DESTINATION ${POSENC_DATADIR}/experiments/extrapolation)
  # `posenc bench`'s PyTorch baselines (cli/bench_common.h).
  install(FILES ${PROJECT_SOURCE_DIR}/bench/torch_baseline.py
                ${PROJECT_SOURCE_DIR}/bench/torch_attention.py
                ${PROJECT_SOURCE_DIR}/bench/torch_common.py
                ${PROJECT_SOURCE_DIR}/bench/posenc_torch_attention.py
          DESTINATION ${POSENC_DATADIR}/bench)
endif()
