# The Debian package: `cpack -G DEB` in a build folder makes loom_<version>_<arch>.deb with `loom`,
# `loom-train` and `loom-commbench` in /usr/bin, the desktop entry, the icon and the AppStream metadata.
# Run-time library dependencies come from dpkg-shlibdeps; the ones it cannot see are listed below.
# Included from the top-level CMakeLists.txt after the programs are defined. Tests and benchmarks have no
# install rules, so they are never packaged.
include(GNUInstallDirs)

install(FILES ${PROJECT_SOURCE_DIR}/installer/loom.desktop DESTINATION ${CMAKE_INSTALL_DATADIR}/applications)
install(FILES ${PROJECT_SOURCE_DIR}/installer/icons/loom.svg
        DESTINATION ${CMAKE_INSTALL_DATADIR}/icons/hicolor/scalable/apps)
install(FILES ${PROJECT_SOURCE_DIR}/installer/io.github.loom.Loom.metainfo.xml
        DESTINATION ${CMAKE_INSTALL_DATADIR}/metainfo)

set(LOOM_PACKAGE_CONTACT "Loom maintainers <maintainers@loom.invalid>"
    CACHE STRING "Maintainer field of the .deb (Name <email>)")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME loom)
set(CPACK_PACKAGE_VENDOR Loom)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${LOOM_PACKAGE_CONTACT}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "workbench for the parallel training of very large models")
# The long description, wrapped under 80 columns as Debian asks.
set(CPACK_PACKAGE_DESCRIPTION
    "Loom plans tensor-, pipeline- and data-parallel layouts for training large
models, predicts what a layout costs (step time, MFU, pipeline bubble, memory
per device), and launches its bundled MPI training engine with live progress.
.
This package holds the workbench and command line (loom), the training engine
(loom-train) and the collective-communication benchmark (loom-commbench).")
set(CPACK_STRIP_FILES ON)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # loom_<version>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# Not linked, so dpkg-shlibdeps cannot see them: `loom run` starts the engine through mpirun, and the run
# store opens SQLite through a Qt plug-in.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "openmpi-bin, libqt6sql6-sqlite")

if(LOOM_HAVE_CUDA)
  # A build with the CUDA parts links libcudart and libnccl from the CUDA toolkit, which no Debian package
  # provides: dpkg-shlibdeps finds them in the private folders and leaves them out of Depends (CPack runs it
  # with --ignore-missing-info), and the programs keep a run path to those folders. Such a .deb works only
  # where the same toolkit is installed in the same place; the `package` preset (WITH_CUDA=OFF) makes one
  # that needs nothing outside Debian.
  get_filename_component(loom_nccl_dir "${NCCL_LIBRARY}" DIRECTORY)
  set(loom_cuda_lib_dirs ${CUDAToolkit_LIBRARY_DIR} ${loom_nccl_dir})
  list(REMOVE_DUPLICATES loom_cuda_lib_dirs)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${loom_cuda_lib_dirs})
  foreach(loom_program IN ITEMS loom-train loom-commbench)
    set_property(TARGET ${loom_program} APPEND PROPERTY INSTALL_RPATH ${loom_cuda_lib_dirs})
  endforeach()
  message(STATUS "Packaging: this build has the CUDA parts; its .deb needs the CUDA toolkit and NCCL in "
                 "${loom_cuda_lib_dirs} on the target machine. `cmake --preset package` makes a CPU-only "
                 "package that installs from Debian's archive alone.")
endif()

include(CPack)
