#!/usr/bin/env python3
"""Checks that no function in the kit's C++ and CUDA sources is over 120 lines.

A function's length is the lines from its name to its closing brace, both
counted. Functions are free functions, member functions, constructors, lambdas
outside any function, and doctest's TEST_CASE bodies; a lambda or SUBCASE inside
a function counts toward that function. Namespaces, classes, structs, unions,
enums, extern "C" blocks and brace initializers are not functions (a member
function inside a class is). Comments, strings, character literals and
preprocessor lines are read past, so a brace in them counts for nothing.

Reads the files git tracks under src/, gpu/, tools/, labs/, solutions/, tests/
and bench/ (every file there outside a git checkout). Usage:
check_function_length.py [KIT_ROOT]; exit 1 naming each long function
(file:line, its name, its length) and each file whose braces do not balance.
"""
import bisect
import re
import subprocess
import sys
from pathlib import Path

LIMIT = 120
FOLDERS = ("src", "gpu", "tools", "labs", "solutions", "tests", "bench")
SOURCES = (".cpp", ".hpp", ".h", ".cc", ".cu", ".cuh")

# One token a match, in this order: what hides braces first (directives,
# comments, literals), then numbers (digit separators: 1'000), names, symbols.
TOKEN = re.compile(r"""
    (?P<skip> ^[ \t]*\#(?:\\\r?\n|[^\n])*          # a directive, with its continued lines
            | //[^\n]*
            | /\*.*?\*/ )
  | (?P<str>  (?:u8|u|U|L)?R"(?P<delim>[^()\\\s]{0,16})\(.*?\)(?P=delim)"
            | (?:u8|u|U|L)?"(?:[^"\\\n]|\\.)*"
            | (?:u8|u|U|L)?'(?:[^'\\\n]|\\.)*' )
  | (?P<num>  \.?\d(?:[eEpP][+-]|[\w.]|'(?=\w))* )
  | (?P<name> [A-Za-z_]\w* )
  | (?P<sym>  ::|->|&&|\S )
""", re.VERBOSE | re.MULTILINE | re.DOTALL)

# Words that may stand between a parameter list and the body ("-> T" included).
QUALIFIER_SYMBOLS = {"::", "->", "&", "&&", "*", "<", ">", ","}
# A call before the parameter list that is not the function's name.
NOT_A_NAME = {"__attribute__", "__launch_bounds__", "alignas", "decltype", "requires", "noexcept",
              "__declspec", "TEST_SUITE"}
DOCTEST = {"TEST_CASE", "TEST_CASE_FIXTURE", "SCENARIO", "TEST_CASE_TEMPLATE"}


class Token:
    __slots__ = ("kind", "text", "pos")

    def __init__(self, kind, text, pos):
        self.kind, self.text, self.pos = kind, text, pos


def tokens(text):
    """The code's tokens, without comments and directives; a literal is one token."""
    return [Token(m.lastgroup if m.lastgroup != "delim" else "str", m.group(), m.start())
            for m in TOKEN.finditer(text) if m.lastgroup != "skip"]


def matching_open(toks, close_index, opening, closing):
    """Index of the bracket that the one at close_index closes, or -1."""
    depth = 0
    for i in range(close_index, -1, -1):
        if toks[i].text == closing:
            depth += 1
        elif toks[i].text == opening:
            depth -= 1
            if depth == 0:
                return i
    return -1


def matching_close(toks, open_index):
    """Index of the ")" that closes the "(" at open_index (the last token if none)."""
    depth = 0
    for i in range(open_index, len(toks)):
        depth += {"(": 1, ")": -1}.get(toks[i].text, 0)
        if depth == 0:
            return i
    return len(toks) - 1


def ends_like_a_function(head):
    """Whether a header ends as a function's does before its body: "...) const",
    "...) -> std::pair<int, int>", or a lambda's capture "= [&]"."""
    angle = 0
    i = len(head) - 1
    while i >= 0:
        t = head[i]
        if t.text == ")":
            return True
        if t.text == "]":
            start = matching_open(head, i, "[", "]")
            before = head[start - 1].text if start > 0 else "="
            return before in ("=", "(", ",", "{", "return")
        if t.text == ">":
            angle += 1
        elif t.text == "<":
            angle -= 1
        elif t.text == "," and angle <= 0:
            return False
        elif t.kind != "name" and t.text not in QUALIFIER_SYMBOLS:
            return False
        i -= 1
    return False


def strip_prefixes(head):
    """The header without access labels ("public:"), template<...> and [[attributes]]."""
    i = 0
    while i < len(head):
        t = head[i].text
        if t in ("public", "private", "protected") and i + 1 < len(head) and head[i + 1].text == ":":
            i += 2
        elif t == "template" and i + 1 < len(head) and head[i + 1].text == "<":
            depth, i = 0, i + 1
            while i < len(head):
                depth += {"<": 1, ">": -1}.get(head[i].text, 0)
                i += 1
                if depth == 0:
                    break
        elif t == "[" and i + 1 < len(head) and head[i + 1].text == "[":
            while i < len(head) and not (head[i].text == "]" and i > 0 and head[i - 1].text == "]"):
                i += 1
            i += 1
        else:
            break
    return head[i:]


def function_name(head, text):
    """The function's name: the name before its first parameter list ("Model::prefill",
    "operator()", "TEST_CASE(\\"...\\")", "lambda"), and where it stands."""
    depth = 0
    for i, t in enumerate(head):
        if t.text != "(":
            depth += {")": -1}.get(t.text, 0)
            continue
        depth += 1
        if depth != 1 or i == 0:
            continue
        prev = head[i - 1]
        word = next((k for k in range(max(0, i - 3), i) if head[k].text == "operator"), None)
        if word == i - 1 and i + 1 < len(head) and head[i + 1].text == ")":  # operator()(...)
            return "operator()", head[word]
        if word is not None:  # operator==, operator bool
            return "operator" + "".join(t.text for t in head[word + 1:i]), head[word]
        if prev.kind != "name" or prev.text in NOT_A_NAME:
            continue
        if prev.text in DOCTEST:
            close = matching_close(head, i)
            return text[prev.pos:head[close].pos + 1][:80], prev
        start = i - 1
        while start >= 2 and head[start - 1].text == "::" and head[start - 2].kind == "name":
            start -= 2
        if start >= 1 and head[start - 1].text == "~":
            start -= 1
        return "".join(t.text for t in head[start:i]), head[start]
    return "lambda", head[-1] if head else None


def kind_of_scope(head, parent):
    """What a brace opens at the level of a namespace, class or initializer: a
    "function", "namespace" (extern "C" too), "class" (struct, union, enum) or "init"."""
    if parent == "init":
        return "function" if ends_like_a_function(head) else "init"
    core = strip_prefixes(head)
    words = [t.text for t in core]
    if len(core) == 2 and words[0] == "extern" and core[1].kind == "str":
        return "namespace"
    # "namespace" after a macro's call too; doctest's TEST_SUITE("...") holds test cases.
    if "namespace" in words or words[:1] == ["TEST_SUITE"]:
        return "namespace"
    first = words[1] if words[:1] == ["typedef"] else (words[0] if words else "")
    if first in ("class", "struct", "union", "enum"):
        return "class"
    if ends_like_a_function(core):
        return "function"
    # A constructor whose initializer list ends with a brace: "X() : a_{1} {".
    if words and words[-1] == "}" and "(" in words:
        return "function"
    return "init"


def functions(text):
    """(name, line, length) of each outermost function in a C++ source, and
    the line of the first unbalanced brace (None when they balance)."""
    toks = tokens(text)
    line_starts = [0] + [m.end() for m in re.finditer(r"\n", text)]

    def line(pos):
        return bisect.bisect_right(line_starts, pos)

    found = []
    stack = []  # (kind, index of "{", name, where the name stands)
    statement = 0  # where the current declaration's tokens begin
    for i, t in enumerate(toks):
        if t.text == ";":
            if not stack or stack[-1][0] != "init":
                statement = i + 1
        elif t.text == "{":
            parent = stack[-1][0] if stack else "namespace"
            if parent in ("function", "inside"):
                stack.append(("inside", i, None, None))
                continue
            head = toks[statement:i]
            kind = kind_of_scope(head, parent)
            name, at = function_name(head, text) if kind == "function" else (None, None)
            stack.append((kind, i, name, at or t))
            if kind != "init":
                statement = i + 1
        elif t.text == "}":
            if not stack:
                return found, line(t.pos)
            kind, opened, name, at = stack.pop()
            if kind == "function":
                found.append((name, line(at.pos), line(t.pos) - line(at.pos) + 1))
            if kind != "init":
                statement = i + 1
    if stack:
        return found, line(toks[stack[-1][1]].pos)
    return found, None


def sources(root):
    """The C++ and CUDA files to read, relative to root."""
    try:
        listed = subprocess.run(["git", "-C", str(root), "ls-files", "--", *FOLDERS],
                                capture_output=True, text=True, check=True).stdout.split()
        names = [n for n in listed if n.endswith(SOURCES)]
    except (OSError, subprocess.CalledProcessError):
        names = [p.relative_to(root).as_posix() for d in FOLDERS for p in (root / d).rglob("*")
                 if p.suffix in SOURCES]
    return sorted(n for n in names if (root / n).is_file())


def main():
    root = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent).resolve()
    problems = []
    names = sources(root)
    count = 0
    for rel in names:
        found, unbalanced = functions((root / rel).read_text(errors="replace"))
        count += len(found)
        if unbalanced is not None:
            problems.append(f"{rel}:{unbalanced}: a brace without its pair; this check cannot read the file")
        problems += [f"{rel}:{at}: {name} is {length} lines" for name, at, length in found if length > LIMIT]
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s): a function is at most {LIMIT} lines "
              "(name to closing brace). Split each into functions named for their steps.")
        return 1
    print(f"{count} functions in {len(names)} files, none over {LIMIT} lines")
    return 0


if __name__ == "__main__":
    sys.exit(main())
