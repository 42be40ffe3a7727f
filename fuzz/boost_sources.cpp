// Boost.JSON and Boost.URL compiled into the fuzz targets, instrumented like everything else here
// (fuzz/CMakeLists.txt says why).
#include <boost/json/src.hpp>
#include <boost/url/src.hpp>
