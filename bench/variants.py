"""Copies of a function made for the benches, written apart from the normalisation they test
(pipeline/stages/code_tokens.py): what a contaminated corpus or a duplicated one holds.

  * `rename`: every name a function binds (its parameters and locals, as `symtable` reports them; nested
    functions' and comprehensions' included) gets a suffix; attributes, keyword-argument names, builtins, imports
    and module-level names stay, so the copy runs as the original does;
  * `reformat`: the code printed again by `ast.unparse`, indented by 2, with a docstring, a comment on every
    line and blank lines;
  * `change_constant`: the first int constant other than 0 and 1 (else the first string) changed;
  * `same_io`: another function, `def f(*args, **kwargs): return <the item's output>`, that a call with the
    item's input returns the item's output from.
"""

import ast
import builtins
import symtable

_BUILTINS = set(dir(builtins))


def bound_names(code: str) -> set[str]:
    """The names some function of `code` binds (parameters, locals), from the compiler's symbol tables."""
    names: set[str] = set()
    top = symtable.symtable(code, "<variant>", "exec")
    stack = list(top.get_children())
    while stack:
        table = stack.pop()
        stack.extend(table.get_children())
        if table.get_type() != "function":
            continue
        for symbol in table.get_symbols():
            if (symbol.is_parameter() or symbol.is_local()) and not symbol.is_imported():
                names.add(symbol.get_name())
    module = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported()}
    return names - module - _BUILTINS


class _Renamer(ast.NodeTransformer):
    def __init__(self, names: set[str], suffix: str):
        self.names, self.suffix = names, suffix

    def visit_Name(self, node: ast.Name) -> ast.Name:
        if node.id in self.names:
            node.id += self.suffix
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        if node.arg in self.names:
            node.arg += self.suffix
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        if node.name in self.names:
            node.name += self.suffix
        self.generic_visit(node)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.ExceptHandler:
        if node.name in self.names:
            node.name += self.suffix
        self.generic_visit(node)
        return node


def rename(code: str, suffix: str) -> str:
    """The code with every name its functions bind suffixed (unchanged when it does not parse)."""
    try:
        tree = ast.parse(code)
        names = bound_names(code)
    except (SyntaxError, ValueError):
        return code
    return ast.unparse(_Renamer(names, suffix).visit(tree)) + "\n"


def reformat(code: str) -> str:
    """The same code, formatted otherwise: 2-space indents, a docstring, comments, blank lines."""
    lines = ast.unparse(ast.parse(code)).splitlines()
    out = []
    for k, line in enumerate(lines):
        stripped = line.lstrip(" ")
        indent = "  " * ((len(line) - len(stripped)) // 4)
        out.append(f"{indent}{stripped}  # step {k}")
        if stripped.startswith("def ") and stripped.endswith(":"):
            out.append(f'{indent}  """What step {k} does."""')
        out.append("")
    return "\n".join(out) + "\n"


def change_constant(code: str) -> str | None:
    """The code with one constant changed: the first int other than 0 and 1 plus one, else the first string with
    a character added; None when it holds neither."""
    tree = ast.parse(code)
    constants = [node for node in ast.walk(tree) if isinstance(node, ast.Constant)]
    ints = [c for c in constants if type(c.value) is int and c.value not in (0, 1)]
    strings = [c for c in constants if isinstance(c.value, str)]
    if ints:
        ints[0].value += 1
    elif strings:
        strings[0].value += "x"
    else:
        return None
    return ast.unparse(tree) + "\n"


def same_io(output: str) -> str:
    """A function that returns `output` whatever it is called with."""
    return f"def f(*args, **kwargs):\n    return {output}\n"
