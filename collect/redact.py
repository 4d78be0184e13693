"""Secret redaction for everything that reaches the database, logs or reports.

Secrets are recognised by name (flags and variables named like *api_key*, *token* (not
*tokens*), *secret*, *password*, *passwd*, *authorization*), by shape (`Bearer ...`,
`sk-...`, `hf_...`) and in URLs (`user:password@`). Redacted values become `***`.
"""

from __future__ import annotations

import re

_NAME = r"(?:api[_-]?key|(?<![a-z])token(?![a-z])|secret|password|passwd|authorization)"
SECRET_NAME = re.compile(_NAME, re.IGNORECASE)
MASK = "***"

_PATTERNS = [
    (re.compile(r"(?i)\bBearer\s+[A-Za-z0-9._~+/=-]+"), f"Bearer {MASK}"),
    # where the name looks secret: NAME=value, NAME = value, NAME: value, "NAME": "value"
    (
        re.compile(
            rf"(?i)\b([A-Z0-9_.-]*{_NAME}[A-Z0-9_.-]*[\"']?)(\s*[=:]\s*)"
            rf"(\"[^\"]*\"|'[^']*'|[^\s,;}}]+)"
        ),
        rf"\1\2{MASK}",
    ),
    # and a flag followed by its value: --api-key value, -token value (a dash before the
    # name: prose such as "a 256-token reply" is no flag)
    (
        re.compile(
            rf"(?i)(?<![\w-])(--?[A-Z0-9_.-]*{_NAME}[A-Z0-9_.-]*)(\s+)"
            rf"(\"[^\"]*\"|'[^']*'|[^\s,;}}]+)"
        ),
        rf"\1\2{MASK}",
    ),
    (re.compile(r"\b(sk|hf|ghp|gho|xox[bp])[-_][A-Za-z0-9_-]{8,}"), MASK),
    (re.compile(r"(?i)(https?://[^\s:/@]+):[^\s@/]+@"), rf"\1:{MASK}@"),
]


def redact(text: str) -> str:
    for pattern, repl in _PATTERNS:
        text = pattern.sub(repl, text)
    return text


def redact_argv(argv: list[str]) -> list[str]:
    """Mask the value after a secret-looking flag (`--api-key X`) and inline forms."""
    out: list[str] = []
    hide_next = False
    for arg in argv:
        if hide_next:
            out.append(MASK)
            hide_next = False
            continue
        if arg.startswith("-") and SECRET_NAME.search(arg):
            if "=" in arg:
                out.append(arg.split("=", 1)[0] + "=" + MASK)
            else:
                out.append(arg)
                hide_next = True
            continue
        out.append(redact(arg))
    return out
