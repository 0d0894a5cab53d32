// The head's live page (web/live.html, built into the binary so an
// installed rlx serves it with nothing beside it): one HTML file, its
// script and style inline, that polls live.json (docs/operating.md).
#pragma once

#include <string_view>

namespace rlx {

std::string_view live_page_html();

}  // namespace rlx
