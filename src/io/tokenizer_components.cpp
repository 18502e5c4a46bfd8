// tokenizer.json's normalizer, pre_tokenizer and decoder, type by type, with
// the fields HF's `tokenizers` serializes for each (anything else is refused:
// a field the kit does not know might change the result).
#include "io/tokenizer_components.hpp"

#include <algorithm>

#include "common.hpp"
#include "io/utf8.hpp"

namespace pd::tok {

void only_fields(const JsonObject& o, std::initializer_list<std::string_view> known) {
    for (auto it = o.json().begin(); it != o.json().end(); ++it)
        if (std::find(known.begin(), known.end(), it.key()) == known.end())
            fail("{}: the field {} is not supported (known here: type and the fields HF writes for it); "
                 "the kit refuses what it does not implement rather than ignore it",
                 o.where(it.key()), clipped_quote(it.key()));
}

namespace {

// A Replace pattern: {"String": s} (literal) or {"Regex": r}.
Regex read_pattern(const JsonObject& o) {
    JsonObject pattern = o.object("pattern");
    only_fields(pattern, {"String", "Regex"});
    if (pattern.find("Regex")) return Regex(pattern.string("Regex"), o.origin());
    return Regex(pattern.string("String"), o.origin(), /*literal=*/true);
}

void add_normalizer(const Json& n, const std::string& origin, std::vector<NormalizerStep>& steps) {
    JsonObject o(n, origin, "normalizer");
    std::string type = o.string("type");
    using Kind = NormalizerStep::Kind;
    NormalizerStep step{};
    if (type == "Sequence") {
        only_fields(o, {"type", "normalizers"});
        for (const Json& sub : o.array("normalizers")) add_normalizer(sub, origin, steps);
        return;
    } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD" || type == "Lowercase") {
        only_fields(o, {"type"});
        step.kind = type == "NFC" ? Kind::nfc : type == "NFD" ? Kind::nfd : type == "NFKC" ? Kind::nfkc
                  : type == "NFKD" ? Kind::nfkd : Kind::lowercase;
    } else if (type == "Strip") {
        only_fields(o, {"type", "strip_left", "strip_right"});
        step.kind = Kind::strip;
        step.strip_left = o.bool_or("strip_left", false);
        step.strip_right = o.bool_or("strip_right", false);
    } else if (type == "Replace") {
        only_fields(o, {"type", "pattern", "content"});
        step.kind = Kind::replace;
        step.pattern.emplace(read_pattern(o));
        step.content = o.string("content");
    } else if (type == "Prepend") {
        only_fields(o, {"type", "prepend"});
        step.kind = Kind::prepend;
        step.content = o.string("prepend");
    } else {
        fail("{}: normalizer {} is not supported (the kit has NFC, NFD, NFKC, NFKD, Lowercase, Strip, "
             "Replace, Prepend and Sequence)",
             origin, clipped_quote(type));
    }
    steps.push_back(std::move(step));
}

// A Split pre-tokenizer: a Regex or String pattern whose matches are kept as
// pieces of their own (Isolated) or dropped (Removed).
PreTokenizerStep split_step(const JsonObject& p) {
    const std::string& origin = p.origin();
    only_fields(p, {"type", "pattern", "behavior", "invert"});
    PreTokenizerStep step;
    JsonObject pattern = p.object("pattern");
    only_fields(pattern, {"String", "Regex"});
    if (pattern.find("Regex")) {
        step.split.emplace(pattern.string("Regex"), origin);
    } else {
        step.split.emplace(pattern.string("String"), origin, /*literal=*/true);
    }
    std::string behavior = p.string("behavior");
    if (behavior != "Isolated" && behavior != "Removed")
        fail("{}: Split behavior {} is not supported (only Isolated and Removed)", origin,
             clipped_quote(behavior));
    if (p.bool_or("invert", false)) fail("{}: Split with \"invert\": true is not supported", origin);
    step.remove_matches = behavior == "Removed";
    return step;
}

// Metaspace's replacement and prepend scheme, shared by the pre-tokenizer and
// the decoder. Files before tokenizers 0.19 have add_prefix_space instead of
// prepend_scheme (true meaning "always").
std::string metaspace_replacement(const JsonObject& o, PreTokenizerStep::Prepend& prepend) {
    only_fields(o, {"type", "replacement", "prepend_scheme", "split", "add_prefix_space", "str_rep"});
    std::string rep = o.string("replacement");
    if (rep.empty() || rep == " " || next_utf8(rep, 0).len != rep.size())
        fail("{}: Metaspace replacement {} must be one character other than a space", o.origin(),
             clipped_quote(rep));
    std::string scheme = o.string_or("prepend_scheme", o.bool_or("add_prefix_space", true) ? "always" : "never");
    using P = PreTokenizerStep::Prepend;
    if (scheme == "always") prepend = P::always;
    else if (scheme == "first") prepend = P::first;
    else if (scheme == "never") prepend = P::never;
    else fail("{}: Metaspace prepend_scheme {} is not one of always, first, never", o.origin(), clipped_quote(scheme));
    return rep;
}

void add_pre_tokenizer(const Json& p, const std::string& origin, std::vector<PreTokenizerStep>& steps,
                       bool& byte_level) {
    if (p.is_null()) return;
    JsonObject pre(p, origin, "pre_tokenizer");
    std::string type = pre.string("type");
    // The steps after ByteLevel would see bytes spelled in the byte alphabet.
    if (byte_level)
        fail("{}: pre-tokenizer {} comes after ByteLevel, which the kit does not support "
             "(ByteLevel must be the last one)",
             origin, clipped_quote(type));
    PreTokenizerStep step;
    if (type == "Sequence") {
        only_fields(pre, {"type", "pretokenizers"});
        for (const Json& sub : pre.array("pretokenizers")) add_pre_tokenizer(sub, origin, steps, byte_level);
        return;
    } else if (type == "ByteLevel") {
        only_fields(pre, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
        byte_level = true;
        step.add_prefix_space = pre.bool_or("add_prefix_space", true);
        if (pre.bool_or("use_regex", true)) step.split.emplace(kGpt2Pattern, origin);
    } else if (type == "Split") {
        step = split_step(pre);
    } else if (type == "Digits") {
        only_fields(pre, {"type", "individual_digits"});
        step.split.emplace(pre.bool_or("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)", origin);
    } else if (type == "Metaspace") {
        step.metaspace = metaspace_replacement(pre, step.prepend);
        step.metaspace_split = pre.bool_or("split", true);
    } else {
        fail("{}: pre-tokenizer {} is not supported (the kit has ByteLevel, Split, Digits, Metaspace "
             "and Sequence)",
             origin, clipped_quote(type));
    }
    steps.push_back(std::move(step));
}

// Where a decoder step stands in the Sequence: what has come before it.
struct DecoderOrder {
    bool byte_fallback = false, fused = false;
};

void add_decoder(const Json& d, const std::string& origin, DecoderRules& r, DecoderOrder& order) {
    JsonObject o(d, origin, "decoder");
    std::string type = o.string("type");
    // Per-token rules are applied to each token's text once, at load; that
    // is exact only before Fuse joins the tokens, and Replace only before
    // ByteFallback turns byte runs into text.
    auto per_token = [&](bool before_byte_fallback) {
        if (order.fused || (before_byte_fallback && order.byte_fallback))
            fail("{}: decoder {} after {} is not supported", origin, clipped_quote(type),
                 order.fused ? "Fuse" : "ByteFallback");
    };
    if (type == "Sequence") {
        only_fields(o, {"type", "decoders"});
        for (const Json& sub : o.array("decoders")) add_decoder(sub, origin, r, order);
    } else if (type == "ByteLevel") {
        only_fields(o, {"type", "add_prefix_space", "trim_offsets", "use_regex"});
        r.byte_level = true;
    } else if (type == "Replace") {
        only_fields(o, {"type", "pattern", "content"});
        per_token(true);
        JsonObject pattern = o.object("pattern");
        only_fields(pattern, {"String"});
        r.replace.emplace_back(pattern.string("String"), o.string("content"));
        if (r.replace.back().first.empty()) fail("{}: decoder Replace has an empty pattern", origin);
    } else if (type == "ByteFallback") {
        only_fields(o, {"type"});
        per_token(false);
        r.byte_fallback = order.byte_fallback = true;
    } else if (type == "Fuse") {
        only_fields(o, {"type"});
        order.fused = true;
    } else if (type == "Strip") {
        only_fields(o, {"type", "content", "start", "stop"});
        r.strip = o.string("content");
        r.strip_start = int(o.integer_or("start", 0, 0, 1000));
        if (!order.fused || o.integer_or("stop", 0, 0, 1000) != 0 || next_utf8(r.strip, 0).len != r.strip.size())
            fail("{}: decoder Strip is supported only after Fuse, with stop 0 and one character as content "
                 "(as Llama 2 and Mistral ship it)",
                 origin);
    } else if (type == "Metaspace") {
        per_token(false);
        PreTokenizerStep::Prepend prepend{};
        r.metaspace = metaspace_replacement(o, prepend);
        r.metaspace_first = prepend != PreTokenizerStep::Prepend::never;
    } else {
        fail("{}: decoder {} is not supported (the kit has ByteLevel, Replace, ByteFallback, Fuse, Strip, "
             "Metaspace and Sequence)",
             origin, clipped_quote(type));
    }
}

}  // namespace

std::vector<NormalizerStep> read_normalizer(const Json& n, const std::string& origin) {
    std::vector<NormalizerStep> steps;
    if (!n.is_null()) add_normalizer(n, origin, steps);
    return steps;
}

std::vector<PreTokenizerStep> read_pre_tokenizer(const Json& p, const std::string& origin, bool& byte_level) {
    std::vector<PreTokenizerStep> steps;
    byte_level = false;
    add_pre_tokenizer(p, origin, steps, byte_level);
    return steps;
}

DecoderRules read_decoder(const Json& d, const std::string& origin, bool byte_level) {
    DecoderRules r;
    if (d.is_null()) {
        // HF joins the tokens with spaces then, which only suits word-level models.
        if (!byte_level) fail("{}: a tokenizer without a decoder is supported only with the ByteLevel pre-tokenizer", origin);
        return r;
    }
    DecoderOrder order;
    add_decoder(d, origin, r, order);
    if (r.byte_level != byte_level)
        fail("{}: {}; the kit supports the ByteLevel decoder exactly with the ByteLevel pre-tokenizer", origin,
             byte_level ? "the pre-tokenizer is ByteLevel but the decoder is not"
                        : "the decoder is ByteLevel but the pre-tokenizer is not");
    if (r.byte_level && (!r.replace.empty() || r.byte_fallback || !r.metaspace.empty() || !r.strip.empty()))
        fail("{}: the ByteLevel decoder together with other decoders is not supported", origin);
    return r;
}

}  // namespace pd::tok
