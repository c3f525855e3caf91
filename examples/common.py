"""Real text that exists on every machine with Python: the standard library's
own docstrings. Shared by the examples; nothing is downloaded."""

import ast
import os
import random
import sysconfig


def standard_library_root():
    return sysconfig.get_paths()["stdlib"]


def docstring_lines(package, min_words=4):
    """Docstring lines of every module of a standard-library package,
    read from the source files with `ast` (nothing is imported)."""
    root = os.path.join(standard_library_root(), package)
    paths = []
    for directory, _, files in os.walk(root):
        if "test" in directory.split(os.sep):
            continue
        paths.extend(os.path.join(directory, f) for f in sorted(files) if f.endswith(".py"))
    lines = []
    for path in sorted(paths):
        with open(path, encoding="utf-8") as file:
            try:
                tree = ast.parse(file.read())
            except SyntaxError:
                continue
        for node in ast.walk(tree):
            if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                doc = ast.get_docstring(node)
                if doc:
                    lines.extend(
                        line.strip()
                        for line in doc.splitlines()
                        if len(line.split()) >= min_words
                    )
    return lines


def labelled_lines(packages, per_class=None, seed=0):
    """`(texts, labels)`: docstring lines labelled by the package they come
    from, shuffled, with at most `per_class` lines per package (balanced)."""
    classes = [docstring_lines(package) for package in packages]
    count = min(len(lines) for lines in classes)
    if per_class is not None:
        count = min(count, per_class)
    rng = random.Random(seed)
    examples = []
    for label, lines in enumerate(classes):
        rng.shuffle(lines)
        examples.extend((line, label) for line in lines[:count])
    rng.shuffle(examples)
    return [text for text, _ in examples], [label for _, label in examples]
