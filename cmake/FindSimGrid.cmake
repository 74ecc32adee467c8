# FindSimGrid: Debian's libsimgrid-dev ships a pkg-config file. Defines SimGrid::SimGrid.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(PC_SIMGRID QUIET simgrid)
endif()
find_path(SimGrid_INCLUDE_DIR simgrid/s4u.hpp HINTS ${PC_SIMGRID_INCLUDE_DIRS})
find_library(SimGrid_LIBRARY NAMES simgrid HINTS ${PC_SIMGRID_LIBRARY_DIRS})
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(SimGrid REQUIRED_VARS SimGrid_LIBRARY SimGrid_INCLUDE_DIR)
if(SimGrid_FOUND AND NOT TARGET SimGrid::SimGrid)
  add_library(SimGrid::SimGrid UNKNOWN IMPORTED)
  set_target_properties(SimGrid::SimGrid PROPERTIES
    IMPORTED_LOCATION "${SimGrid_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${SimGrid_INCLUDE_DIR}")
endif()
mark_as_advanced(SimGrid_INCLUDE_DIR SimGrid_LIBRARY)
