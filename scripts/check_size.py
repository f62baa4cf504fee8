#!/usr/bin/python3
"""Size check of the test command (docs/ARCHITECTURE.md, "Layers"): no tracked source file under
src/, cli/ or python/ has more than 600 lines, and no function in them more than 80 lines
(signature, decorators and docstring included), and no C/C++ file there opens with a comment of
more than 15 lines (a file header says what the file holds and where its contract is; the design
sits above the code it explains). Public headers (include/posenc/) are exempt: their docblock is
the home of the formula. Prints each offender and exits 1 if there is any.

C and C++ functions are found as a line that ends a signature with `{` (not a control statement,
a type or a namespace), back to the signature's first line and on to the brace that closes it,
counted on lines with comments and string literals blanked; a lambda or a local class is part of
the function around it. Python functions come from ast.
"""
import ast
import pathlib
import re
import subprocess
import sys

MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
MAX_HEADER_LINES = 15
ROOT = pathlib.Path(__file__).resolve().parents[1]
KEYWORDS = (r"(if|for|while|switch|else|do|namespace|struct|class|enum|union|extern|return|try|"
            r"catch)")
SIGNATURE = re.compile(r"^\s*(?!" + KEYWORDS + r"\b)[A-Za-z_~\[].*\)\s*(const)?\s*(noexcept)?\s*"
                       r"(override)?\s*(->\s*[\w:<>, ]+)?\s*\{\s*$")


def blank(line):
    """The line without string and character literals and // comments."""
    line = re.sub(r'R"(\w*)\(.*?\)\1"', '""', line)
    line = re.sub(r'"(\\.|[^"\\])*"', '""', line)
    line = re.sub(r"'(\\.|[^'\\])*'", "''", line)
    return line.split("//")[0]


def cxx_functions(text):
    """(first line, line count, signature) of every function definition at any depth."""
    raw = text.split("\n")
    lines = [blank(x) for x in raw]
    found = []
    for i, line in enumerate(lines):
        if not SIGNATURE.match(line) or "=" in line.split("(")[0]:
            continue
        start = i
        while (start > 0 and lines[start - 1].strip()
               and not lines[start - 1].rstrip().endswith((";", "}", "{", ":"))
               and not raw[start - 1].lstrip().startswith(("//", "#", "template"))):
            start -= 1
        depth, end = 0, i
        while end < len(lines):
            depth += lines[end].count("{") - lines[end].count("}")
            if depth <= 0:
                break
            end += 1
        signature = re.sub(r"\s+", " ", " ".join(x.strip() for x in raw[start:i + 1]))
        found.append((start + 1, end - start + 1, signature[:90]))
    return found


def header_lines(text):
    """Lines of the // comment block a C/C++ file opens with."""
    count = 0
    for line in text.split("\n"):
        if not line.startswith("//"):
            break
        count += 1
    return count


def python_functions(text, name):
    found = []
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            found.append((start, node.end_lineno - start + 1, node.name))
    return found


def offenders(root=ROOT):
    files = subprocess.run(["git", "ls-files", "src", "cli", "python"], cwd=root, check=True,
                           capture_output=True, text=True).stdout.split()
    out = []
    for name in files:
        if name.endswith((".cc", ".h", ".c")):
            functions = cxx_functions
        elif name.endswith(".py"):
            functions = python_functions
        else:
            continue
        text = (root / name).read_text()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES:
            out.append(f"{name}: {lines} lines (at most {MAX_FILE_LINES})")
        if functions is cxx_functions and header_lines(text) > MAX_HEADER_LINES:
            out.append(f"{name}: a header comment of {header_lines(text)} lines (at most "
                       f"{MAX_HEADER_LINES})")
        args = (text,) if functions is cxx_functions else (text, name)
        for first, count, signature in functions(*args):
            if count > MAX_FUNCTION_LINES:
                out.append(f"{name}:{first}: {signature}: {count} lines (at most "
                           f"{MAX_FUNCTION_LINES})")
    return out


def main():
    found = offenders()
    for line in found:
        print(line)
    if found:
        print(f"size: {len(found)} files or functions over the limits")
        return 1
    print(f"size: no file over {MAX_FILE_LINES} lines, no function over {MAX_FUNCTION_LINES}, "
          f"no file header over {MAX_HEADER_LINES}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
