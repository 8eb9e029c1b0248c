# Offline stand-in for TheLartians/PackageProject.cmake (used by PPQSort):
# only the NAMESPACE::NAME alias that Tracy links against; no install rules.
cmake_minimum_required(VERSION 3.14)
function(packageProject)
  cmake_parse_arguments(PP "" "NAME;NAMESPACE" "" ${ARGN})
  if(NOT TARGET ${PP_NAMESPACE}::${PP_NAME})
    add_library(${PP_NAMESPACE}::${PP_NAME} ALIAS ${PP_NAME})
  endif()
endfunction()
