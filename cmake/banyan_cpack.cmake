# Debian packages of banyan: `cpack -G DEB` in a build directory (docs: README.md,
# "Install and embed"). Configure with -DBUILD_SHARED_LIBS=ON -DCMAKE_INSTALL_PREFIX=/usr
# for the usual shared libraries under /usr/lib/<multiarch>.
#   libbanyan      the shared libraries (runtime)
#   libbanyan-dev  headers, static or development libraries, CMake config, banyan.pc
#   banyan         the `banyan` command-line tool
set(CPACK_PACKAGE_NAME banyan)
set(CPACK_PACKAGE_VENDOR "banyan")
set(CPACK_PACKAGE_CONTACT "banyan maintainers <banyan@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PROJECT_HOMEPAGE_URL}")
set(CPACK_COMPONENTS_ALL lib dev cli)
set(CPACK_DEBIAN_LIB_PACKAGE_NAME libbanyan)
set(CPACK_DEBIAN_LIB_PACKAGE_DEPENDS
    "libcaf-core0.17, libcaf-io0.17, libcapnp-0.9.2, libuv1 (>= 1.40), libssl3, libgcrypt20")
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libbanyan-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_PACKAGE_DEPENDS
    "libbanyan (= ${PROJECT_VERSION}), libcaf-dev, libcapnp-dev, capnproto, libuv1-dev, libssl-dev, libgcrypt20-dev, pkg-config")
set(CPACK_DEBIAN_CLI_PACKAGE_NAME banyan)
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION net)
set(CPACK_DEBIAN_CLI_PACKAGE_DEPENDS
    "libcaf-core0.17, libcaf-io0.17, libcapnp-0.9.2, libuv1 (>= 1.40), libssl3, libgcrypt20")
include(CPack)
