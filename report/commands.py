"""How the report shows a launch command in the services table, shortened where it must be
and marked wherever it is cut (the appendix prints each command whole).

service_summary.own_flags holds the flags one service does not share with every other; this
module puts back what that column's blank-splitting cut (an environment value with a blank)
and cuts what would not fit (long paths, long values), each cut marked with CUT.
"""

from __future__ import annotations

import re
import shlex

import pandas as pd

# A whole argument that is a path, alone or as a flag's or variable's value (``--x=/a/b``):
# starts with / or ~, no blanks, braces or backslashes (``\input{/etc/x}`` is not a path).
_PATH_ARG = re.compile(r"(?P<key>[^\s=/{}\\]+=)?(?P<path>[/~][^\s{}\\]*/[^\s{}\\/]+)")
SHORT_PATH_MIN = 24  # paths of at most this many characters stay as written
CUT = "..."  # marks where a path was cut


def _short_arg(arg: str) -> str:
    m = _PATH_ARG.fullmatch(arg)
    if m is None or len(m["path"]) <= SHORT_PATH_MIN:
        return arg
    return (m["key"] or "") + CUT + "/" + m["path"].rsplit("/", 1)[1]


def short_paths(flags: str) -> str:
    """``flags`` with every long argument that is a whole path cut to ``.../basename``
    (``-md /a/b/.../m.gguf`` -> ``-md .../m.gguf``, ``--x=/a/.../b`` -> ``--x=.../b``); any
    other argument, a path inside it included, stays as written. The full command is in the
    appendix."""
    return re.sub(r"\S+", lambda m: _short_arg(m.group(0)), flags)


ENV_SHOWN = 48  # characters of one environment assignment the services table shows
_ENV = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(.*)", re.S)


def _env_values(command: str) -> dict[str, str]:
    """The NAME=value assignments before a launch command's program, values unquoted."""
    try:
        words = shlex.split(command)
    except ValueError:  # a command cut or scrubbed mid-quote
        return {}
    env = {}
    for word in words:
        m = _ENV.fullmatch(word)
        if m is None:
            break
        env[m[1]] = m[2]
    return env


def whole_env(flags: str, command: str) -> str:
    """``flags`` (service_summary.own_flags) with each environment assignment whole again.
    service_summary splits the command on blanks, so an assignment whose value holds one
    (``X='a b'``, quoted as the command quotes it) arrives cut at it. Each comes back as the
    command writes it, up to ENV_SHOWN characters; a longer one is cut and ends in CUT. An
    assignment that cannot be found in the command but is visibly cut (an open quote) ends in
    CUT too: a cut value is never shown without its mark. The appendix has the command."""
    env = _env_values(command)
    out = []
    for token in flags.split(" "):
        m = _ENV.fullmatch(token)
        if m is not None and m[1] in env:
            full = f"{m[1]}={shlex.quote(env[m[1]])}"
            if full != token and full.split()[0] == token:
                token = full if len(full) <= ENV_SHOWN else full[:ENV_SHOWN] + CUT
        elif m is not None and token.count("'") % 2:
            token += CUT
        out.append(token)
    return " ".join(out)


def flags_cell(r: pd.Series) -> str:
    """A services-table cell: the service's own flags, environment values whole (or cut and
    marked), long whole-path arguments cut to their base name; '--' for none."""
    flags = r.get("own_flags")
    if flags is None or pd.isna(flags) or flags == "":
        return "--"
    command = r.get("launch_command")
    whole = whole_env(str(flags), command if isinstance(command, str) else "")
    return short_paths(whole)
