"""The scope-aware normalisation (pipeline/stages/code_tokens.py): renamed and reformatted copies are the same
tokens, programs that differ in a method, an attribute, a builtin or a constant are not."""

import ast

import pytest

from pipeline.stages.code_tokens import normalised_tokens, printed_tokens, written_tokens

ORIGINAL = '''
def f(s, x):
    """Rotate s to start at x."""
    index = s.index(x)  # where it starts
    head = [c for c in s[:index] if c != x]
    while (n := len(head)) > 3:
        head.pop()
    try:
        tail = s[index:]
    except TypeError as error:
        raise ValueError(error)
    return tail + ''.join(head), n
'''
RENAMED = """
def f(text, ch):
    k = text.index(ch)
    front = [t for t in text[:k]
             if t != ch]
    while (size := len(front)) > 3: front.pop()
    try:
        rest = text[k:]
    except TypeError as e:
        raise ValueError(e)
    return (rest + "".join(front), size)
"""


def tokens(code: str) -> str:
    return " ".join(normalised_tokens(code))


def test_a_renamed_and_reformatted_copy_is_the_same_tokens():
    """Every name the function binds renamed (a local named like the method it is assigned from included),
    formatting, quotes, comments and the docstring changed."""
    assert normalised_tokens(RENAMED) == normalised_tokens(ORIGINAL)
    assert "index" in normalised_tokens(ORIGINAL)  # the method, kept as written; the local is numbered


def test_names_are_numbered_per_scope_and_globals_are_kept():
    nested = (
        "import math\nLIMIT = 9\ndef f(a, b):\n    def g(a):\n        return a + b + LIMIT\n    return g(a) + math.pi\n"
    )
    same = "import math\nTOP = 9\ndef f(p, q):\n    def h(r):\n        return r + q + TOP\n    return h(p) + math.pi\n"
    assert normalised_tokens(nested) == normalised_tokens(same)
    assert tokens(nested).endswith("return v0 + v1_1 + v0_2 return v2 ( v0 ) + math . pi")
    assert (
        tokens("def f(a):\n    return len(a) + undefined_global")
        == "def v0 ( v0 ) : return len ( v0 ) + undefined_global"
    )


def test_a_method_defined_in_a_class_body_is_an_attribute():
    code = "class C:\n    size = 2\n    def grow(self, n):\n        return self.size * n\n"
    assert tokens(code) == "class v0 : size = 2 def grow ( v0 , v1 ) : return v0 . size * v1"


@pytest.mark.parametrize(
    "one, other",
    [
        ("def f(xs, v):\n    xs.append(v)\n    return xs", "def f(xs, v):\n    xs.extend(v)\n    return xs"),
        ("def f(t):\n    return True", "def f(t):\n    return bool(t)"),
        ("def f(p):\n    return p.x", "def f(p):\n    return p.y"),
        ("def f(n):\n    return n + 1", "def f(n):\n    return n + 2"),
        ("def f(n):\n    return sorted(n, key=abs)", "def f(n):\n    return sorted(n, key=len)"),
    ],
)
def test_programs_of_the_same_shape_that_differ_in_a_method_builtin_or_constant_differ(one, other):
    assert normalised_tokens(one) != normalised_tokens(other)


def test_a_changed_constant_is_the_one_changed_token():
    a, b = normalised_tokens(ORIGINAL), normalised_tokens(ORIGINAL.replace("> 3", "> 4"))
    assert len(a) == len(b) and [(x, y) for x, y in zip(a, b, strict=True) if x != y] == [("3", "4")]


def test_code_that_does_not_parse_falls_back_to_numbered_tokens():
    broken = "def f(xs) return xs.append(1) +"
    renamed = "def f(ys)  return ys.append(1) +  # note"
    assert normalised_tokens(broken) == normalised_tokens(renamed)
    assert "append" in normalised_tokens(broken)


def test_the_printed_code_is_split_as_pythons_tokenizer_splits_it(example_records):
    """`printed_tokens` (a regular expression over `ast.unparse`'s output) gives `written_tokens` (the tokenizer)."""
    tricky = (
        "x = f'{a!r:>{w}}' + rb'\\x00' + 'a\"b' + \"q'\\\"\"\ny = 1e-05 + 0x1F + 3j + 1_000.5 + .5\n"
        "@dec\ndef g(*, a=..., **k) -> int:\n    global q\n    x @= 2; x **= 3; x //= 4; x >>= 1; x != y\n"
        "    return (yield)\n"
    )
    parsed = []
    for code in [tricky, ORIGINAL, *(record["code"] for record in example_records)]:
        try:
            parsed.append(ast.parse(code))
        except SyntaxError:
            continue  # an example that does not parse (its failure row is the point)
    assert len(parsed) > 100
    for tree in parsed:
        printed = ast.unparse(tree)
        assert printed_tokens(printed) == written_tokens(printed), printed
