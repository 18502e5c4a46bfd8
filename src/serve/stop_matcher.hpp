// Stop strings across token boundaries. A stop string may arrive split over
// several tokens ("\n" + "\n" for "\n\n"), so text that could still be the
// start of a stop string is held back until the next piece decides it: the
// client never sees any part of a stop string, and sees everything else.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pd::serve {

class StopMatcher {
public:
    explicit StopMatcher(std::vector<std::string> stops);

    // Appends a piece of generated text; returns the text now safe to send
    // (possibly ""). Once a stop string has appeared, returns the text before
    // it and stopped() turns true; later pieces return "".
    std::string push(std::string_view piece);
    // The held-back text, for when generation ends without a stop string.
    std::string flush();
    bool stopped() const { return stopped_; }

private:
    // Length of the longest suffix of held_ that is a proper prefix of a stop string.
    std::size_t partial_suffix() const;

    std::vector<std::string> stops_;  // non-empty strings
    std::string held_;                // text not yet sent
    bool stopped_ = false;
};

}  // namespace pd::serve
