#include "io/template_lexer.hpp"

#include <cctype>

#include "common.hpp"
#include "io/utf8.hpp"

namespace pd::tok::tmpl {

namespace {

std::string normalise_newlines(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\r') out += s[i];
        else if (i + 1 >= s.size() || s[i + 1] != '\n') out += '\n';
    }
    if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
    return out;
}

// The end of the white space that starts at s[i].
std::size_t skip_space(std::string_view s, std::size_t i) {
    while (i < s.size()) {
        const Utf8Char c = next_utf8(s, i);
        if (c.status != Utf8Char::ok || !py_space(c.cp)) break;
        i += c.len;
    }
    return i;
}

// s without its trailing white space.
std::string_view rstrip_space(std::string_view s) {
    while (!s.empty()) {
        const std::optional<Utf8Char> c = prev_utf8(s, s.size());
        if (!c || !py_space(c->cp)) break;
        s.remove_suffix(c->len);
    }
    return s;
}

bool all_space(std::string_view s) { return !s.empty() && skip_space(s, 0) == s.size(); }

class Lexer {
public:
    explicit Lexer(std::string_view source) : src_(normalise_newlines(source)) {}

    std::vector<Token> run() {
        for (;;) {
            const std::size_t tag = next_tag();
            std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);
            if (tag == src_.size()) {
                add_data(text);
                break;
            }
            const char kind = src_[tag + 1], sign = tag + 2 < src_.size() ? src_[tag + 2] : ' ';
            if (sign == '-') text = rstrip_space(text);
            else if (kind != '{' && sign != '+') text = lstrip_block(text);
            add_data(text);
            pos_ = tag + 2 + (sign == '-' || (sign == '+' && kind != '{'));
            if (kind == '#') comment(tag);
            else inside_tag(kind == '{');
        }
        out_.push_back({Token::eof, "", {}, line_at(src_.size())});
        return std::move(out_);
    }

private:
    std::size_t next_tag() const {
        for (std::size_t i = src_.find('{', pos_); i != std::string::npos; i = src_.find('{', i + 1))
            if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
        return src_.size();
    }

    // lstrip_blocks: the spaces between a line's start and a block tag go.
    std::string_view lstrip_block(std::string_view text) const {
        const std::size_t l = text.rfind('\n') + 1;  // npos + 1 == 0
        const bool line_starting = pos_ == 0 || src_[pos_ - 1] == '\n';
        if ((l > 0 || line_starting) && all_space(text.substr(l))) return text.substr(0, l);
        return text;
    }

    void add_data(std::string_view text) {
        if (!text.empty()) out_.push_back({Token::data, std::string(text), {}, line_at(pos_)});
    }

    // The line of byte p. Counted on from the last call (tokens come in order),
    // so a long template costs one pass, not one per token.
    int line_at(std::size_t p) {
        if (p < counted_to_) counted_to_ = 0, counted_lines_ = 1;
        counted_lines_ += int(std::count(src_.begin() + long(counted_to_), src_.begin() + long(p), '\n'));
        counted_to_ = p;
        return counted_lines_;
    }

    // After a tag's closer: -X} strips all white space, X} (block or comment) one newline.
    void after_close(std::size_t close_end, char sign, bool block) {
        pos_ = close_end;
        if (sign == '-') pos_ = skip_space(src_, pos_);
        else if (block && sign != '+' && pos_ < src_.size() && src_[pos_] == '\n') ++pos_;
    }

    void comment(std::size_t tag) {
        const std::size_t end = src_.find("#}", pos_);
        if (end == std::string::npos) fail("chat_template: line {}: a comment {{# is never closed", line_at(tag));
        after_close(end + 2, src_[end - 1], true);
    }

    void inside_tag(bool var) {
        const std::string closer = var ? "}}" : "%}";
        out_.push_back({var ? Token::var_begin : Token::block_begin, "", {}, line_at(pos_)});
        for (;;) {
            while (pos_ < src_.size() && std::isspace((unsigned char)src_[pos_])) ++pos_;
            if (pos_ >= src_.size()) fail("chat_template: line {}: a {} tag is never closed", line_at(pos_), var ? "{{" : "{%");
            const std::string_view rest = std::string_view(src_).substr(pos_);
            const char sign = rest[0];
            if ((sign == '-' || (sign == '+' && !var)) && rest.substr(1).starts_with(closer)) {
                out_.push_back({var ? Token::var_end : Token::block_end, "", {}, line_at(pos_)});
                return after_close(pos_ + 3, sign, !var);
            }
            if (rest.starts_with(closer)) {
                out_.push_back({var ? Token::var_end : Token::block_end, "", {}, line_at(pos_)});
                return after_close(pos_ + 2, ' ', !var);
            }
            out_.push_back(expression_token());
        }
    }

    Token expression_token() {
        const int line = line_at(pos_);
        const char c = src_[pos_];
        if (std::isalpha((unsigned char)c) || c == '_') {
            const std::size_t start = pos_;
            while (pos_ < src_.size() && (std::isalnum((unsigned char)src_[pos_]) || src_[pos_] == '_')) ++pos_;
            return {Token::name, src_.substr(start, pos_ - start), {}, line};
        }
        if (std::isdigit((unsigned char)c)) return number(line);
        if (c == '\'' || c == '"') return {Token::string, string_literal(line), {}, line};
        for (std::string_view op : {"//", "==", "!=", "<=", ">=", "**"})
            if (std::string_view(src_).substr(pos_).starts_with(op)) {
                pos_ += 2;
                return {Token::op, std::string(op), {}, line};
            }
        if (std::string_view("+-*/%~<>=()[]{}.,:|").find(c) != std::string_view::npos) {
            ++pos_;
            return {Token::op, std::string(1, c), {}, line};
        }
        fail("chat_template: line {}: unexpected character {:?} in a tag", line, std::string(1, c));
    }

    Token number(int line) {
        const std::size_t start = pos_;
        while (pos_ < src_.size() && std::isdigit((unsigned char)src_[pos_])) ++pos_;
        const bool fraction = pos_ + 1 < src_.size() && src_[pos_] == '.' && std::isdigit((unsigned char)src_[pos_ + 1]);
        if (fraction)
            for (++pos_; pos_ < src_.size() && std::isdigit((unsigned char)src_[pos_]);) ++pos_;
        const std::string digits = src_.substr(start, pos_ - start);
        if (fraction) return {Token::number, digits, Json(std::stod(digits)), line};
        if (digits.size() > 18) fail("chat_template: line {}: the number {} is too large", line, digits);
        return {Token::number, digits, Json(std::stoll(digits)), line};
    }

    // Python's escapes as Jinja decodes them; an unknown escape keeps its backslash.
    std::string string_literal(int line) {
        const char quote = src_[pos_++];
        std::string out;
        for (;;) {
            if (pos_ >= src_.size()) fail("chat_template: line {}: a string is never closed", line);
            const char c = src_[pos_++];
            if (c == quote) return out;
            if (c != '\\' || pos_ >= src_.size()) {
                out += c;
                continue;
            }
            escape(src_[pos_++], out, line);
        }
    }

    void escape(char e, std::string& out, int line) {
        static const std::string_view from = "ntr\\'\"abfv0", to = "\n\t\r\\'\"\a\b\f\v";
        if (const std::size_t k = from.find(e); k != std::string_view::npos && e != '0') return void(out += to[k]);
        const int digits = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
        if (digits == 0) {
            if (e == '0' || e == 'N') fail("chat_template: line {}: the string escape \\{} is not supported", line, e);
            out += '\\';
            out += e;
            return;
        }
        const std::string hex = src_.substr(pos_, std::size_t(digits));
        if (hex.size() != std::size_t(digits) || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail("chat_template: line {}: a string's \\{} escape needs {} hex digits", line, e, digits);
        pos_ += std::size_t(digits);
        append_utf8(out, char32_t(std::stoul(hex, nullptr, 16)));
    }

    std::string src_;
    std::size_t pos_ = 0;
    std::size_t counted_to_ = 0;
    int counted_lines_ = 1;
    std::vector<Token> out_;
};

}  // namespace

bool py_space(char32_t c) { return is_white_space(c) || (c >= 0x1C && c <= 0x1F); }

std::vector<Token> lex_template(std::string_view source) { return Lexer(source).run(); }

}  // namespace pd::tok::tmpl
