"""Code as tokens, the same for every copy of a program: the normalisation the dedup and decontamination compare.

`normalised_tokens(code)`, for Python that parses (`ast`):
  * the names the code binds are numbered by scope: parameters, assigned locals, for-, with- and except-targets,
    walrus targets (bound in the enclosing function, as Python does), comprehension variables (their own scope),
    nested functions', lambdas' and classes' names, `match` captures, module-level definitions. Each scope numbers
    its own names `v<k>` by first appearance; a name of an enclosing scope is `v<k>_<d>`, d scopes out (class
    bodies not counted); `global`/`nonlocal` refer to the owning scope's. So a consistent renaming of what a
    function binds gives the same tokens, one name bound in two scopes is two names, and a function's body has
    the same tokens alone or among other definitions;
  * everything else is kept as written: attributes and methods (`xs.append` is not `xs.extend`), keyword-argument
    names, names bound in a class body (they are attributes), imported names, builtins, globals the code does not
    bind, and literals (a changed constant is a changed token);
  * docstrings and comments are dropped and the code is printed by `ast.unparse`, so formatting, quotes and
    redundant parentheses do not matter; the tokens are that text's Python tokens without line structure.
Code that does not parse falls back to its Python tokens (formatting and comments dropped) with every name that is
not a keyword, a builtin or an attribute (after `.`) numbered by first appearance; code that does not tokenize
either, to its whitespace-separated words.

`NORMALISATION` versions this function: it is part of the dedup's and the decontamination's hashed settings, so a
dataset made with another normalisation is another config (docs/architecture.md §2).
"""

import ast
import builtins
import io
import keyword
import re
import tokenize

NORMALISATION = 2  # 1: every identifier numbered by first appearance, attributes included (issue 38)

_SKIP = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.INDENT,
    tokenize.DEDENT,
    tokenize.ENCODING,
    tokenize.ENDMARKER,
}
_PRINTED_TOKEN = re.compile(
    r"""\s+|(?P<t>[rRbBuUfF]{0,2}(?:'''(?:\\.|[^\\])*?'''|\"\"\"(?:\\.|[^\\])*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*")"""
    r"|0[xXoObB]\w+|\d[\d_]*(?:\.[\d_]*)?(?:[eE][-+]?\d[\d_]*)?[jJ]?|\w+"
    r"|\.\.\.|\*\*=|//=|>>=|<<=|->|:=|[-+*/%&|^@<>=!]=|\*\*|//|<<|>>|\S)"
)
_KEPT_NAMES = set(keyword.kwlist) | set(keyword.softkwlist) | set(dir(builtins))
_DOCUMENTED = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def normalised_tokens(code: str) -> list[str]:
    """The code's tokens with formatting, comments and docstrings dropped and the names it binds numbered."""
    try:
        tree = ast.parse(code)
        _Binder().bind(tree)
        text = ast.unparse(tree)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return _numbered_tokens(code)
    return printed_tokens(text)


def printed_tokens(text: str) -> list[str]:
    """The Python tokens of `ast.unparse`'s output (what `written_tokens` gives for it, a few times faster: that
    text has no comments, no line continuations, strings in one quoted piece, numbers written out)."""
    return [m.group("t") for m in _PRINTED_TOKEN.finditer(text) if m.group("t")]


def written_tokens(code: str) -> list[str]:
    """The code's Python tokens with formatting and comments dropped, names as written (its words when it does
    not tokenize)."""
    try:
        return [t.string for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in _SKIP]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return code.split()


def _numbered_tokens(code: str) -> list[str]:
    """The fallback for code that does not parse: names not keywords, builtins or attributes numbered."""
    names: dict[str, str] = {}
    tokens: list[str] = []
    for text in written_tokens(code):
        if text.isidentifier() and text not in _KEPT_NAMES and (not tokens or tokens[-1] != "."):
            text = names.setdefault(text, f"v{len(names)}")
        tokens.append(text)
    return tokens


class _Scope:
    """A module, function (lambdas included), class or comprehension scope and the names bound in it."""

    def __init__(self, kind: str, parent: "_Scope | None"):
        self.kind, self.parent = kind, parent
        self.bound: set[str] = set()
        self.imported: set[str] = set()
        self.declared_global: set[str] = set()
        self.declared_nonlocal: set[str] = set()
        self.numbers: dict[str, int] = {}  # bound name -> its number, by first appearance

    def distance(self, owner: "_Scope") -> int:
        """How many scopes out `owner` is (class bodies not counted)."""
        scope, n = self, 0
        while scope is not owner and scope is not None:
            scope = scope.parent
            n += scope is not None and scope.kind != "class"
        return n

    def owner(self, name: str) -> "_Scope | None":
        """The scope whose binding `name` means here (Python's rules, class bodies skipped from nested scopes);
        None when it is kept as written: imported, bound in a class body, or not bound by the code."""
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.imported:
                return None
            if name in scope.declared_global:
                return _module(scope).owner(name)
            if name in scope.bound and name not in scope.declared_nonlocal:
                return None if scope.kind == "class" else scope
            scope = scope.parent
            while scope is not None and scope.kind == "class":
                scope = scope.parent
        return None


def _module(scope: _Scope) -> _Scope:
    while scope.parent is not None:
        scope = scope.parent
    return scope


class _Binder:
    """Finds every scope's bindings, then renames each binding and use the code owns (`bind`)."""

    def __init__(self):
        self.scope = _Scope("module", None)
        self.sites: list[tuple[ast.AST, str, int | None, _Scope]] = []  # (node, field, list index, scope)

    def bind(self, tree: ast.Module) -> None:
        _drop_docstrings(tree)
        self.visit(tree)
        for node, name_field, position, scope in self.sites:
            value = getattr(node, name_field)
            name = value if position is None else value[position]
            owner = scope.owner(name)
            if owner is None:
                continue
            number = f"v{owner.numbers.setdefault(name, len(owner.numbers))}"
            distance = scope.distance(owner)
            if distance:
                number += f"_{distance}"
            if position is None:
                setattr(node, name_field, number)
            else:
                value[position] = number

    def visit(self, node: ast.AST) -> None:
        """`ast.NodeVisitor.visit` without its per-node name lookup and generator (the normalisation's hot loop)."""
        method = _VISITS.get(node.__class__)
        if method is not None:
            method(self, node)
            return
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        self.visit(item)
            elif isinstance(value, ast.AST):
                self.visit(value)

    def _site(self, node: ast.AST, name_field: str, position: int | None = None, binds: bool = False) -> None:
        if binds:
            name = getattr(node, name_field)
            self.scope.bound.add(name if position is None else name[position])
        self.sites.append((node, name_field, position, self.scope))

    def _enter(self, kind: str) -> _Scope:
        outer, self.scope = self.scope, _Scope(kind, self.scope)
        return outer

    def visit_Name(self, node: ast.Name) -> None:
        self._site(node, "id", binds=not isinstance(node.ctx, ast.Load))

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> None:
        if not isinstance(node, ast.Lambda):
            self._site(node, "name", binds=True)
            for expression in [*node.decorator_list, node.returns]:
                if expression is not None:
                    self.visit(expression)
        arguments = node.args
        for expression in [*arguments.defaults, *arguments.kw_defaults]:
            if expression is not None:
                self.visit(expression)
        outer = self._enter("function")
        for argument in [*arguments.posonlyargs, *arguments.args, arguments.vararg, *arguments.kwonlyargs]:
            if argument is not None:
                self._argument(argument)
        if arguments.kwarg is not None:
            self._argument(arguments.kwarg)
        for statement in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(statement)
        self.scope = outer

    visit_AsyncFunctionDef = visit_FunctionDef
    visit_Lambda = visit_FunctionDef

    def _argument(self, argument: ast.arg) -> None:
        if argument.annotation is not None:
            self.visit(argument.annotation)
        self._site(argument, "arg", binds=True)

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._site(node, "name", binds=True)
        for expression in [*node.decorator_list, *node.bases, *node.keywords]:
            self.visit(expression)
        outer = self._enter("class")
        for statement in node.body:
            self.visit(statement)
        self.scope = outer

    def visit_comprehension_scope(self, node: ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp) -> None:
        self.visit(node.generators[0].iter)  # evaluated in the enclosing scope
        outer = self._enter("comprehension")
        for k, generator in enumerate(node.generators):
            self.visit(generator.target)
            if k:
                self.visit(generator.iter)
            for condition in generator.ifs:
                self.visit(condition)
        for expression in [node.key, node.value] if isinstance(node, ast.DictComp) else [node.elt]:
            self.visit(expression)
        self.scope = outer

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = visit_comprehension_scope

    def visit_NamedExpr(self, node: ast.NamedExpr) -> None:
        self.visit(node.value)
        scope = self.scope
        while scope.kind == "comprehension" and scope.parent is not None:
            scope = scope.parent
        scope.bound.add(node.target.id)
        self.sites.append((node.target, "id", None, scope))

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.type is not None:
            self.visit(node.type)
        if node.name is not None:
            self._site(node, "name", binds=True)
        for statement in node.body:
            self.visit(statement)

    def visit_Import(self, node: ast.Import | ast.ImportFrom) -> None:
        for alias in node.names:
            self.scope.imported.add(alias.asname or alias.name.split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_Global(self, node: ast.Global) -> None:
        self.scope.declared_global.update(node.names)
        for k in range(len(node.names)):
            self._site(node, "names", k)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        self.scope.declared_nonlocal.update(node.names)
        for k in range(len(node.names)):
            self._site(node, "names", k)

    def visit_MatchAs(self, node: ast.MatchAs) -> None:
        if node.pattern is not None:
            self.visit(node.pattern)
        if node.name is not None:
            self._site(node, "name", binds=True)

    def visit_MatchStar(self, node: ast.MatchStar) -> None:
        if node.name is not None:
            self._site(node, "name", binds=True)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> None:
        for expression in [*node.keys, *node.patterns]:
            self.visit(expression)
        if node.rest is not None:
            self._site(node, "rest", binds=True)


_VISITS = {
    getattr(ast, name[len("visit_") :]): method
    for name, method in vars(_Binder).items()
    if name.startswith("visit_") and hasattr(ast, name[len("visit_") :])
}


def _drop_docstrings(tree: ast.Module) -> None:
    """Remove the docstring of the module and of every function and class (`pass` where nothing is left)."""
    for node in ast.walk(tree):
        if not isinstance(node, _DOCUMENTED) or not node.body:
            continue
        first = node.body[0]
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            node.body = node.body[1:] or ([] if isinstance(node, ast.Module) else [ast.Pass()])
