# sparsp_module(<folder> [WHOLE_ARCHIVE] [PUBLIC_DEPS ...] [PRIVATE_DEPS ...])
# One library target per top-level folder: sparsp_<folder> (alias sparsp::<folder>) from the
# folder's *.cpp files (and *.cu when the CUDA backend is on). Private headers stay beside the
# sources; public ones live in include/sparsp/.
# WHOLE_ARCHIVE: for a folder whose registry entries register themselves from their own files
# (static registrars no other object references). The archive is sparsp_<folder>_archive and
# sparsp::<folder> is an interface target that links it whole, so the linker keeps every entry.
function(sparsp_module folder)
  cmake_parse_arguments(ARG "WHOLE_ARCHIVE" "" "PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  file(GLOB _src CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  if(SPARSP_HAVE_CUDA)
    file(GLOB _cu CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cu)
    list(APPEND _src ${_cu})
  endif()
  if(_src AND ARG_WHOLE_ARCHIVE)
    add_library(sparsp_${folder}_archive STATIC ${_src})
    target_link_libraries(sparsp_${folder}_archive PUBLIC sparsp_headers ${ARG_PUBLIC_DEPS}
                          PRIVATE sparsp_warnings ${ARG_PRIVATE_DEPS})
    target_include_directories(sparsp_${folder}_archive PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_definitions(sparsp_${folder}_archive PRIVATE
                               SPARSP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
    add_library(sparsp_${folder} INTERFACE)
    target_link_libraries(sparsp_${folder} INTERFACE
                          "$<LINK_LIBRARY:WHOLE_ARCHIVE,sparsp_${folder}_archive>")
  elseif(_src)
    add_library(sparsp_${folder} STATIC ${_src})
    target_link_libraries(sparsp_${folder} PUBLIC sparsp_headers ${ARG_PUBLIC_DEPS}
                          PRIVATE sparsp_warnings ${ARG_PRIVATE_DEPS})
    target_include_directories(sparsp_${folder} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
    target_compile_definitions(sparsp_${folder} PRIVATE SPARSP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  else()
    add_library(sparsp_${folder} INTERFACE)
    target_link_libraries(sparsp_${folder} INTERFACE sparsp_headers ${ARG_PUBLIC_DEPS})
  endif()
  add_library(sparsp::${folder} ALIAS sparsp_${folder})
endfunction()
