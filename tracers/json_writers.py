"""The JSON writers of everything the tracers write, bound at import from the C encoder.

A traced program runs in the same process and may replace `json.dumps` or `json.JSONEncoder`: writers built
here before it runs (and sealed copies of them, tracers.guard.seal) keep writing true JSON. Standard library only.
"""

import json
from json import encoder as _json_encoder


def _unencodable(value):
    raise TypeError("not JSON serializable: %s" % type(value).__name__)


def json_writer(item_separator, key_separator):
    """`json.dumps` with these separators, built once from the C encoder: patching `json` changes nothing."""
    make = _json_encoder.c_make_encoder
    if make is None:  # no _json accelerator: the pure encoder, bound now
        return json.JSONEncoder(separators=(item_separator, key_separator)).encode
    chunks = make(
        None,
        _unencodable,
        _json_encoder.c_encode_basestring_ascii,
        None,
        key_separator,
        item_separator,
        False,
        False,
        True,
    )
    join = "".join
    return lambda value: join(chunks(value, 0))


compact = json_writer(",", ":")  # the tracers' streams: event arrays, entries, the plugin's objects
encode_object = json_writer(", ", ": ")  # what json.dumps(obj) gives: the runner's header and end objects
quote = _json_encoder.c_encode_basestring_ascii or _json_encoder.py_encode_basestring_ascii  # a str as a JSON string
