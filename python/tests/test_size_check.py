"""scripts/check_size.py (run by scripts/test.sh) finds long C++ and Python functions and only
those: its counting on small planted sources."""
import importlib.util

from conftest import ROOT

spec = importlib.util.spec_from_file_location("check_size", ROOT / "scripts" / "check_size.py")
check_size = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check_size)


def cxx(body_lines):
    body = "\n".join(f"  x += {i};  // a {{ brace in a comment" for i in range(body_lines))
    return ('namespace n {\n// A function.\nint Long(int x,\n         int y) {\n'
            f'  const char* s = "}}";\n{body}\n  return x;\n}}\n\n'
            "void Short() {\n  if (true) {\n  }\n}\n}  // namespace n\n")


def test_cxx_function_lengths_include_the_signature_and_ignore_braces_in_text():
    found = {sig.split("(")[0]: (first, count)
             for first, count, sig in check_size.cxx_functions(cxx(74))}
    assert found["int Long"] == (3, 79)  # signature (2) + string line + 74 + return + brace
    assert found["void Short"][1] == 4
    assert "if" not in " ".join(found)


def test_python_function_lengths_include_decorators_and_docstrings():
    src = "@decorator\ndef f():\n    '''doc\n    more'''\n" + "    x = 1\n" * 10
    assert check_size.python_functions(src, "m.py") == [(1, 14, "f")]


def test_header_lines_count_the_opening_comment_only():
    assert check_size.header_lines("// a\n// b\n#pragma once\n// c\n") == 2
    assert check_size.header_lines("#include <x>\n") == 0


def test_the_limits_are_80_600_and_15():
    assert (check_size.MAX_FUNCTION_LINES, check_size.MAX_FILE_LINES,
            check_size.MAX_HEADER_LINES) == (80, 600, 15)
