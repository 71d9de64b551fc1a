cmake_minimum_required(VERSION 3.25)
# cmake -DDIR=<folder> -DMODULE=<module> -DUSES=<a;b> -P cmake/check_layer.cmake
# runs the include check of cmake/layers.cmake on one folder.
include(${CMAKE_CURRENT_LIST_DIR}/layers.cmake)
tpuemu_check_layer("${DIR}" "${MODULE}" "${USES}")
