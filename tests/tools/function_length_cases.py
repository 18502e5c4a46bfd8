#!/usr/bin/env python3
"""tools/check_function_length.py on made-up sources.

What it counts as a function and how long (braces in literals, comments and
directives read past; a lambda inside a function counted toward it; namespaces,
classes, enums, extern "C" and initializers not functions; member functions,
constructors, TEST_CASE bodies are), and that a kit with a 121-line function
fails naming it while one of 120 lines passes.

    function_length_cases.py --check TOOLS/check_function_length.py
"""
import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

LITERALS = r'''#define OPEN {
int f() {
  const char* a = "{{";  // }
  char b = '}';  /* { */
  auto c = R"x({)")x";
  long d = 1'000 + '{';
  return a[0] + b + c[0] + d;
}
'''

LAMBDA_INSIDE = '''void run(int n) {
  auto step = [&](int i) {
    if (i) { return i; }
    return 0;
  };
  step(n);
}
'''

SCOPES = '''namespace a::b {
extern "C" {
struct Box {
  enum class E { kA, kB };
  int a_{1};
  Box(int a) : a_{a}, b_(2) {
  }
  int get() const noexcept { return a_; }
  int b_;
};
}
const int table[] = {1, 2, {3}};
const Handler handlers[] = {{"x", [](int x) {
  return x;
}}};
Box::Box() : a_(0), b_{0} {
}
auto pair() -> std::pair<int, int> {
  return {1, 2};
}
}  // namespace a::b
'''

DOCTEST = '''TEST_SUITE("suite") {
TEST_CASE("outer") {
  SUBCASE("inner") {
    CHECK(1);
  }
}
}
'''

EXPECTED = [
    (LITERALS, [("f", 2, 7)]),
    (LAMBDA_INSIDE, [("run", 1, 7)]),
    (SCOPES, [("Box", 6, 2), ("get", 8, 1), ("lambda", 13, 3), ("Box::Box", 16, 2), ("pair", 18, 3)]),
    (DOCTEST, [('TEST_CASE("outer")', 2, 5)]),
]


def load(path):
    spec = importlib.util.spec_from_file_location("check_function_length", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def check_cases(module):
    failures = []
    for text, expected in EXPECTED:
        found, unbalanced = module.functions(text)
        if found != expected or unbalanced is not None:
            failures.append(f"{text.splitlines()[0]!r}...: found {found} (unbalanced at {unbalanced}), "
                            f"expected {expected}")
    found, unbalanced = module.functions("void f() {\n  if (x) {\n}\n")
    if unbalanced != 1:
        failures.append(f"an unclosed function: unbalanced at {unbalanced}, expected line 1")
    return failures


def long_function(lines):
    """A function of that many lines, name to closing brace."""
    return "int long_one() {\n" + "  x++;\n" * (lines - 2) + "}\n"


def run_on_tree(check, source):
    with tempfile.TemporaryDirectory() as kit:
        os.makedirs(os.path.join(kit, "src"))
        with open(os.path.join(kit, "src", "long.cpp"), "w") as f:
            f.write(source)
        return subprocess.run([sys.executable, check, kit], capture_output=True, text=True)


def check_limit(check):
    failures = []
    over = run_on_tree(check, long_function(121))
    if over.returncode != 1 or "src/long.cpp:1: long_one is 121 lines" not in over.stdout:
        failures.append(f"121 lines: exit {over.returncode}, {over.stdout!r}")
    at = run_on_tree(check, long_function(120))
    if at.returncode != 0:
        failures.append(f"120 lines: exit {at.returncode}, {at.stdout!r}")
    return failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", required=True)
    args = parser.parse_args()
    failures = check_cases(load(args.check)) + check_limit(args.check)
    for f in failures:
        print("FAIL:", f)
    print(f"{len(failures)} failure(s)" if failures else "all function-length cases pass")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
