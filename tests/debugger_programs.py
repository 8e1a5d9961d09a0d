"""Small programs written for the debugger tests: (name, code, entry, input).

They only call their own functions and builtins implemented in C, so pdb and the tracer see the same
frames (the tracer follows only the program's own code; pdb would also step into Python-level stdlib).
"""

PROGRAMS = [
    (
        "worked_example",
        """def g(x):
    y = x * 2
    return y + 1

def f(a):
    b = a + 1
    c = g(b)
    d = c - a
    for i in range(2):
        d += i
    return d
""",
        "f",
        "3",
    ),
    (
        "two_calls_one_line",
        """def sq(v):
    w = v * v
    return w

def f(a, b):
    total = sq(a) + sq(b)
    total += 1
    return total
""",
        "f",
        "2, 3",
    ),
    (
        "recursion",
        """def fact(n):
    if n <= 1:
        return 1
    rest = fact(n - 1)
    return n * rest

def f(n):
    out = fact(n)
    return out
""",
        "f",
        "4",
    ),
    (
        "caught_exception",
        """def check(x):
    if x < 0:
        raise ValueError(x)
    return x

def f(xs):
    good = []
    for x in xs:
        try:
            good.append(check(x))
        except ValueError:
            good.append(0)
    return good
""",
        "f",
        "[1, -2, 3]",
    ),
    (
        "uncaught_exception",
        """def inner(x):
    y = x - 1
    raise KeyError(y)

def middle(x):
    z = x * 2
    inner(z)
    return z

def f(x):
    a = x + 1
    return middle(a)
""",
        "f",
        "5",
    ),
    (
        "generator_for",
        """def count(n):
    i = 0
    while i < n:
        yield i * 10
        i += 1

def f(n):
    t = 0
    for v in count(n):
        t += v
    return t
""",
        "f",
        "3",
    ),
    (
        "generator_next",
        """def gen(x):
    yield x
    y = x + 1
    yield y

def f(x):
    it = gen(x)
    a = next(it)
    b = next(it)
    return a + b
""",
        "f",
        "4",
    ),
    (
        "comprehensions",
        """def f(n):
    squares = [k * k for k in range(n)]
    evens = {k for k in squares if k % 2 == 0}
    total = sum(k for k in squares)
    return squares, sorted(evens), total
""",
        "f",
        "4",
    ),
    (
        "lambdas_from_c",
        """def f(words):
    key = lambda w: (len(w), w)
    ordered = sorted(words, key=key)
    lengths = list(map(lambda w: len(w), ordered))
    return ordered, lengths
""",
        "f",
        "['pear', 'fig', 'apple']",
    ),
    (
        "closure",
        """def make_adder(k):
    def add(v):
        return v + k
    return add

def f(a):
    plus3 = make_adder(3)
    x = plus3(a)
    y = plus3(x)
    return y
""",
        "f",
        "1",
    ),
    (
        "class_methods",
        """class Counter:
    def __init__(self, start):
        self.value = start

    def bump(self, by):
        self.value += by
        return self.value

def f(n):
    c = Counter(n)
    c.bump(2)
    last = c.bump(3)
    return last
""",
        "f",
        "1",
    ),
    (
        "while_break",
        """def f(limit):
    n = 0
    seen = []
    while True:
        n += 3
        if n > limit:
            break
        if n % 2:
            continue
        seen.append(n)
    return seen
""",
        "f",
        "20",
    ),
    (
        "try_finally",
        """def risky(x):
    try:
        y = 10 // x
    finally:
        x = -x
    return y

def f(a):
    r = risky(a)
    try:
        s = risky(0)
    except ZeroDivisionError as e:
        s = -1
    return r + s
""",
        "f",
        "5",
    ),
    (
        "context_manager",
        """class Guard:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append('in')
        return self

    def __exit__(self, kind, value, tb):
        self.log.append('out')
        return kind is ValueError

def f(x):
    log = []
    with Guard(log):
        y = x + 1
        if y > 2:
            raise ValueError(y)
    return log
""",
        "f",
        "4",
    ),
    (
        "mutual_recursion",
        """def is_even(n):
    if n == 0:
        return True
    return is_odd(n - 1)

def is_odd(n):
    if n == 0:
        return False
    return is_even(n - 1)

def f(n):
    e = is_even(n)
    return e
""",
        "f",
        "3",
    ),
    (
        "early_return",
        """def find(xs, target):
    for i, x in enumerate(xs):
        if x == target:
            return i
    return -1

def f(xs):
    a = find(xs, 7)
    b = find(xs, 100)
    return a, b
""",
        "f",
        "[5, 7, 9]",
    ),
    (
        "default_and_kwargs",
        """def scale(v, factor=2, *, offset=0):
    out = v * factor + offset
    return out

def f(v):
    a = scale(v)
    b = scale(v, 3, offset=1)
    return a + b
""",
        "f",
        "2",
    ),
    (
        "string_processing",
        """def tokens(text):
    out = []
    word = ''
    for ch in text:
        if ch == ' ':
            if word:
                out.append(word)
            word = ''
        else:
            word += ch
    if word:
        out.append(word)
    return out

def f(text):
    ws = tokens(text)
    return len(ws), ws
""",
        "f",
        "'ab  cd e'",
    ),
    (
        "dict_counting",
        """def bump(counts, key):
    counts[key] = counts.get(key, 0) + 1

def f(items):
    counts = {}
    for it in items:
        bump(counts, it)
    best = max(counts, key=counts.get)
    return best, counts
""",
        "f",
        "['a', 'b', 'a']",
    ),
    (
        "raise_from",
        """class AppError(Exception):
    pass

def load(x):
    try:
        return int(x)
    except ValueError as err:
        raise AppError(x) from err

def f(xs):
    out = []
    for x in xs:
        try:
            out.append(load(x))
        except AppError:
            out.append(None)
    return out
""",
        "f",
        "['1', 'x', '3']",
    ),
    (
        "yield_from",
        """def inner(n):
    for i in range(n):
        yield i
    return n

def outer(n):
    got = yield from inner(n)
    yield got * 100

def f(n):
    return list(outer(n))
""",
        "f",
        "2",
    ),
    (
        "nested_calls_deep",
        """def a(x):
    return b(x) + 1

def b(x):
    y = c(x)
    return y * 2

def c(x):
    return x - 3

def f(x):
    p = a(x)
    q = a(p)
    return p, q
""",
        "f",
        "10",
    ),
    (
        "error_at_entry_line",
        """def f(x):
    y = x[0]
    return y
""",
        "f",
        "[]",
    ),
    (
        "generator_close_early",
        """def naturals():
    n = 0
    while True:
        yield n
        n += 1

def f(k):
    out = []
    for v in naturals():
        if v >= k:
            break
        out.append(v)
    return out
""",
        "f",
        "2",
    ),
    (
        "duplicate_lines",
        """def up(xs):
    total = 0
    for x in xs:
        total += x
    return total

def down(xs):
    total = 0
    for x in xs:
        total += x
    return -total

def f(xs):
    a = down(xs)
    b = up(xs)
    return a + b
""",
        "f",
        "[1, 2]",
    ),
]
