/* The header clang precompiles once per build (analysis/stages/build.py: SVE_HEADER): the ACLE
 * objects read arm_sve.h from it instead of parsing its 1.5 MB each. */
#include <arm_sve.h>
