// Whether a sequence stops after the token it just generated: the length and
// EOS core of every stop decision. pd::generate, speculative decoding, the
// disaggregated decode worker and serve's FinishRule (which adds stop
// strings on top) all ask stop_after. A sequence of prompt_len tokens that
// has generated `generated` tokens, the last of them `token`, stops at the first of
//
//   EOS          token is one of eos_ids (empty: never)          -> eos
//   max_tokens   generated == max_tokens                         -> length
//   the context  the next decode would write position
//                prompt_len + generated - 1, which must be < max_positions -> length
//
// The last generated token is never fed back, so a sequence fills at most
// prompt_len + generated - 1 positions: prompt_len + generated <= max_positions + 1.
#pragma once

#include <span>
#include <vector>

namespace pd {

struct StopLimits {
    std::vector<int> eos_ids;  // any of them ends the sequence; empty: generate past EOS
    int max_tokens = 0;        // generated tokens at most (>= 1)
    int max_positions = 0;     // cache positions per sequence: the context (> 0)
};

enum class StopReason { none, eos, length };

// The verdict after generating `token`, the `generated`-th new token (>= 1).
StopReason stop_after(const StopLimits& l, int prompt_len, int generated, int token);

// Tokens a sequence may still generate before a length limit ends it (the last of them ends it).
int stop_room(const StopLimits& l, int prompt_len, int generated);

// Whether `token` is one of `eos_ids`.
bool is_eos(std::span<const int> eos_ids, int token);

// The ids a run stops at: `ids` (a Config's eos_ids), or none where `honour`
// is false (--ignore-eos, ignore_eos).
std::vector<int> eos_ids(std::span<const int> ids, bool honour = true);

}  // namespace pd
