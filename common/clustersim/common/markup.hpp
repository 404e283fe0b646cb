// Escaping text for XML and HTML output (GraphML exports, HTML reports).
#pragma once

#include <string>
#include <string_view>

namespace cs {

// & < > " and ' as character entities: safe in element text and in quoted attributes.
std::string xml_escape(std::string_view s);

}  // namespace cs
