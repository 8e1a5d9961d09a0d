"""The first test session of a noxfile and its `session.install(...)` arguments, read with `ast` (never run).

Standard library only.
"""

import ast

from tracers.install.requirements import split_option


def nox_test_session(tree):
    """(name, [install argument lists]) of the first test session of a noxfile's syntax tree, or None."""
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or not node.args.args:
            continue
        name = session_name(node)
        if name is None or not any(word in name.lower() for word in ("test", "pytest", "unit")):
            continue
        param = node.args.args[0].arg
        calls = []
        for call in ast.walk(node):
            func = call.func if isinstance(call, ast.Call) else None
            if (
                isinstance(func, ast.Attribute)
                and func.attr == "install"
                and isinstance(func.value, ast.Name)
                and func.value.id == param
            ):
                calls.append([arg.value for arg in call.args if isinstance(arg, ast.Constant)])
        return name, calls
    return None


def session_name(node):
    """The session name of a function decorated with `nox.session` / `session` (its `name=` if a literal)."""
    for decorator in node.decorator_list:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        dotted = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", None)
        if dotted != "session":
            continue
        for keyword in decorator.keywords if isinstance(decorator, ast.Call) else []:
            if (
                keyword.arg == "name"
                and isinstance(keyword.value, ast.Constant)
                and isinstance(keyword.value.value, str)
            ):
                return keyword.value.value
        return node.name
    return None


def nox_lines(calls):
    """pip lines of `session.install` argument lists: `-r X`, `-c X`, `-e X` pairs kept, other options dropped."""
    out = []
    for args in calls:
        args = [arg for arg in args if isinstance(arg, str)]
        index = 0
        while index < len(args):
            arg = args[index].strip()
            if arg in ("-r", "--requirement", "-c", "--constraint", "-e", "--editable") and index + 1 < len(args):
                out.append("%s %s" % (arg, args[index + 1].strip()))
                index += 2
                continue
            if arg and (not arg.startswith("-") or split_option(arg)[0] in ("-r", "-c", "-e")):
                out.append(arg)
            index += 1
    return out
