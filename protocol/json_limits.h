// Limits on JSON read from the network, checked before it is parsed.
//
// nlohmann's parser keeps a node (and a stack entry) per level of nesting, and much of what walks
// a parsed document (dump, comparisons, the injector's patch) recurses: a request body of 4 MiB
// of "[" costs hundreds of MiB, or the stack, before anything can refuse it. Every body the
// operator reads from the network (the manager API's, the webhook's AdmissionReviews) is
// checked with checkJsonDepth first, which costs one pass over the bytes and no allocation.
#pragma once

#include <cstddef>
#include <string_view>

#include "base/status.h"

namespace kshard::protocol {

// Deeper than any document kshard reads: a Pod in an AdmissionReview nests about 12 levels
// (request.object.spec.affinity...matchExpressions[].values[]).
inline constexpr std::size_t kMaxJsonDepth = 64;

// InvalidArgument, naming the byte offset, when `text` opens more than `maxDepth` arrays and
// objects inside one another. Brackets inside strings do not count (escapes are followed). It
// does not validate: malformed text is left to the parser, which can then nest no deeper than
// `maxDepth` before it fails, since it reads what this reads up to its first error. Like the
// parser, it reads nothing after a NUL byte.
[[nodiscard]] Status checkJsonDepth(std::string_view text, std::size_t maxDepth = kMaxJsonDepth);

}  // namespace kshard::protocol
