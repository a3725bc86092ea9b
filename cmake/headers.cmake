# Include roots: every library's headers are included through their folder's
# name, `#include "engine/program.h"`, `#include "planner/plan.h"`, never by a
# bare name that a system header shares (<error.h>, <memory.h>).
#
# A folder's root is build/include/NAME, holding one folder, NAME/, of links
# to the folder's own headers (not its internal/): a library's include path
# is its root plus the roots of the libraries it links, so an include that
# runs up the layers still does not compile, as when the include path was the
# folder itself.  internal/ gets a root of its own, build/include/NAME-internal
# (NAME/internal/ a link to the folder), which only the library itself and the
# targets that link offsim_NAME_internal see.
#
# The links are made at configure time; a header added or removed re-runs
# CMake (CONFIGURE_DEPENDS).

# offsim_header_root(VAR NAME DIR): VAR = the root of DIR's headers, as NAME/.
function(offsim_header_root var name dir)
  set(root ${PROJECT_BINARY_DIR}/include/${name})
  file(GLOB headers CONFIGURE_DEPENDS ${dir}/*.h)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/${name})
  foreach(header IN LISTS headers)
    get_filename_component(file ${header} NAME)
    file(CREATE_LINK ${header} ${root}/${name}/${file} SYMBOLIC)
  endforeach()
  set(${var} ${root} PARENT_SCOPE)
endfunction()

# offsim_internal_root(VAR NAME DIR): VAR = the root of DIR/internal, as NAME/internal/.
function(offsim_internal_root var name dir)
  set(root ${PROJECT_BINARY_DIR}/include/${name}-internal)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/${name})
  file(CREATE_LINK ${dir}/internal ${root}/${name}/internal SYMBOLIC)
  set(${var} ${root} PARENT_SCOPE)
endfunction()
