// The default cluster.toml, compiled into the binary so `rlx launch`
// works from any directory.
#pragma once

namespace rlx {
const char* embedded_cluster_toml();
}
