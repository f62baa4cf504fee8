# Install and export, like fmt: headers, library, CMake package posenc::posenc.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(POSENC_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/posenc)
install(TARGETS posenc EXPORT posenc-targets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/posenc
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT posenc-targets NAMESPACE posenc:: DESTINATION ${POSENC_CMAKE_DIR})
export(EXPORT posenc-targets NAMESPACE posenc::
       FILE ${PROJECT_BINARY_DIR}/posenc-targets.cmake)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/posenc-config.cmake.in
  ${PROJECT_BINARY_DIR}/posenc-config.cmake INSTALL_DESTINATION ${POSENC_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/posenc-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/posenc-config.cmake
              ${PROJECT_BINARY_DIR}/posenc-config-version.cmake
        DESTINATION ${POSENC_CMAKE_DIR})
if(TARGET posenc_cli)
  install(TARGETS posenc_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
