"""Secret scrubbing: credentials are replaced by typed markers before text becomes a memory.

`scrub(text)` returns the scrubbed text and one `Redaction` per secret, with offsets into the
ORIGINAL text. Each secret becomes `[secret:<kind>]`; markers already in the input are never
matched again, so scrubbing is idempotent.

Precision rules (a redacted order number is a lost memory, a kept key is a leak):

- Provider formats (sk-, sk-ant-, ghp_/gho_/github_pat_, xox?-, AKIA, AIza, sk_live_, JWT, PEM)
  are redacted wherever they appear; their shapes are specific enough.
- Free-form values (passwords, generic high-entropy tokens, AWS secret keys) are redacted only
  right after a keyword (password, pwd, passphrase, PIN, token, secret, key, credential, auth).
  Generic tokens also need >= 20 chars, a letter and a digit, Shannon entropy >= 3.5 bits/char,
  and must not read as a path, a file name or words-and-numbers (deploy_key_2024_production,
  v2.3.1-beta.4+build.7). Passwords after "is" must not be a describing word ("is weak").
- Connection strings: only the password between `user:` and `@` is redacted; the scheme, user,
  host and database stay (they are useful, non-secret context). Kind `connection_string`.
- Card numbers: 13-19 digits, either unbroken or in the usual 4-4-4-4 / 4-6-5 / 4-6-4 groups with
  one kind of separator, starting 2-6, and Luhn-valid; not right after "order", "invoice",
  "tracking", "ref", "account", "ISBN", "#" ... unless "card"/"visa"/"credit" is also there.
- Deliberately NOT secrets: base64 `data:` URIs (image payloads; masked so no rule fires inside
  them), PEM public keys and certificates, `ssh-rsa`/`ssh-ed25519` public keys, git SHAs, UUIDs,
  phone numbers, ISBNs, and anything random-looking without a keyword in front of it.

Speed: patterns start with a literal (the regex engine then skips ahead with a fast search) and
keyword rules run only where a cheap scan of the lower-cased text found a keyword.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

KINDS = ("api_key", "token", "password", "private_key", "card_number", "aws_key", "jwt",
         "connection_string", "generic_secret")

MARKER = re.compile(r"\[secret:[a-z_]+\]")
_DATA_URI = re.compile(r"data:[\w/+.-]+;base64,[A-Za-z0-9+/=]+")
MIN_GENERIC_LEN = 20
MIN_ENTROPY = 3.5
_BLANK = "\x00"  # what markers, data URIs and chosen spans become while rules run


@dataclass(frozen=True, slots=True)
class Redaction:
    kind: str
    start: int  # offsets in the ORIGINAL text
    end: int


def marker(kind: str) -> str:
    return f"[secret:{kind}]"


def shannon_entropy(value: str) -> float:
    """Bits per character of `value` by its own character frequencies."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


def looks_random(value: str) -> bool:
    """The generic-token test: long, a letter and a digit, and high per-character entropy."""
    return (
        len(value) >= MIN_GENERIC_LEN
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
        and shannon_entropy(value) >= MIN_ENTROPY
    )


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


# --- provider formats ------------------------------------------------------------------------
# Each pattern starts with its literal and checks the word boundary with a look-behind after it.

# The whole block; a block cut off before its END line runs over its base64 and header lines.
_PEM = re.compile(
    r"-----BEGIN ((?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?)-----"
    r"(?:.*?-----END \1-----|(?:\r?\n(?:[A-Za-z0-9+/=]{8,}|[A-Za-z-]+: [^\n]*"
    r"|[ \t]*(?=\r?\n[A-Za-z0-9+/=]{8,})))*)",
    re.S,
)


def _tokenish(value: str) -> bool:
    """A header credential, not a long word: "Basic internationalization" is prose."""
    return any(c.isdigit() or c in "+/=_-." for c in value) or any(c.isupper() for c in value[1:])


@dataclass(frozen=True, slots=True)
class _Format:
    kind: str
    hint: str  # a literal that must occur in the text (lower-cased text when `lower`)
    pattern: re.Pattern[str]
    group: int = 0  # the group holding the secret
    check: Callable[[str], bool] | None = None
    lower: bool = False


_FORMATS: tuple[_Format, ...] = (
    _Format("jwt", "eyJ", re.compile(
        r"eyJ(?<!\weyJ)[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}")),
    _Format("api_key", "sk-ant-", re.compile(r"sk-ant-(?<!\wsk-ant-)(?:[a-z]+\d*-)?[A-Za-z0-9_-]{20,}")),
    _Format("api_key", "sk-", re.compile(
        r"sk-(?<!\wsk-)(?:proj-|svcacct-|admin-)?(?=[A-Za-z0-9_-]*\d)(?=[A-Za-z0-9_-]*[A-Za-z])"
        r"[A-Za-z0-9_-]{20,}")),
    _Format("token", "gh", re.compile(r"gh[pousr]_(?<!\wgh[pousr]_)[A-Za-z0-9]{30,}\b")),
    _Format("token", "github_pat_", re.compile(r"github_pat_(?<!\wgithub_pat_)[A-Za-z0-9_]{22,}\b")),
    _Format("token", "xox", re.compile(r"xox[abprse]-(?<!\wxox[abprse]-)(?=[A-Za-z0-9-]*\d)[A-Za-z0-9-]{10,}")),
    _Format("aws_key", "A", re.compile(r"A(?:KIA|SIA|BIA|CCA)(?<!\wA[A-Z]{3})[0-9A-Z]{16}\b")),
    _Format("api_key", "AIza", re.compile(r"AIza(?<!\wAIza)[0-9A-Za-z_-]{35}(?![0-9A-Za-z_-])")),
    _Format("api_key", "k_", re.compile(r"[spr]k_(?<!\w[spr]k_)(?:live|test)_[A-Za-z0-9]{16,}\b")),
    # An AWS secret access key: 40 base64 chars, only when named as such just before.
    _Format("aws_key", "aws", re.compile(
        r"(?i:aws[\w .-]{0,20}?secret[\w .-]{0,20}?)[\"']?\s*(?:[:=]|=>|\bis\b)?\s*[\"']?"
        r"(?<![A-Za-z0-9/+])([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"), group=1, lower=True),
    _Format("token", "B", re.compile(
        r"(?:Bearer(?<!\wBearer)|Basic(?<!\wBasic))[ \t]+([A-Za-z0-9._~+/-]{16,}=*)"), group=1, check=_tokenish),
)

# Only the password of scheme://user:password@host; the scheme is checked by looking back.
_CONNECTION = re.compile(r"://[^\s:/@\"'<>]+:([^\s@/\"'<>]+)@[^\s/@\"'<>]+")
_SCHEME_BEFORE = re.compile(r"(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{1,30}$")

# --- keyword-anchored values -----------------------------------------------------------------

# Where a keyword may be; the identifier around it decides which rule (if any) applies.
_KEYWORD_HINT = re.compile(r"key|token|secret|credential|auth|pass|pwd|pin")
_IDENT_HEAD = re.compile(r"[A-Za-z0-9_-]+$")
_IDENT_TAIL = re.compile(r"[A-Za-z0-9_-]*")
_CAMEL = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_PW_WORDS = frozenset({"password", "passwd", "passphrase", "passcode", "pwd"})
_SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "credential", "credentials", "auth"})
# Key-field segments that describe a password or key rather than hold one.
_META = frozenset("""hash hashed reset policy length min max expiry expires expired field manager hint
    label prompt strength required changed updated rules requirements file path count type name
    url uri endpoint header limit size""".split())

_FILLER = r"(?:[ \t]+(?:for|to|of|on|at)[ \t]+(?:the[ \t]+|my[ \t]+|our[ \t]+|your[ \t]+)?[\w.-]+(?:[ \t]+[\w.-]+)?)?"
_VALUE = r"(?:\"([^\"\n]{1,128})\"|'([^'\n]{1,128})'|`([^`\n]{1,128})`|([^\s\"'`;,&<>]{1,128}))"
_PASSWORD_TAIL = re.compile(
    _FILLER + r"(?:[\"']?[ \t]*(?::=|=>|[:=])[ \t]*|[ \t]+(?:is|was)[ \t]*:?[ \t]+|[ \t]+(?=[\"'`]))" + _VALUE
)
_PIN_TAIL = re.compile(r"(?:[ \t]+code|[ \t]+number)?(?:[ \t]*[:=][ \t]*|[ \t]+(?:is|was)[ \t]+)(\d{4,12})\b")
# key=VALUE / key: "VALUE" / key VALUE / key for staging is VALUE (filler words only before is/was).
_GENERIC_TAIL = re.compile(
    r"(?:[\"']?[ \t]*(?::=|=>|[:=])[ \t]*|(?:[ \t]+[a-z]{1,12}){0,3}?[ \t]+(?:is|was)[ \t]*:?[ \t]+|[ \t]+)"
    r"[\"'`]?([A-Za-z0-9+/_.~-]{20,}={0,2})"
)
# Values that describe a password rather than being one: "my password is weak / too short / in
# the vault", and schema placeholders such as {"password": "string"}.
_PW_STOP = frozenset("""a an the my your our their its this that it weak strong wrong incorrect correct
    expired invalid valid required too very not still same different case long short secure safe
    insecure compromised hidden stored saved set reset changed empty blank missing hashed encrypted
    ok okay fine good bad easy hard simple complex in on at for from with by under somewhere
    written something nothing what now also being been going protected managed
    none null n/a na yes no true false optional redacted unknown tbd todo here below above
    string str text password passwd value undefined example placeholder""".split())
_PLACEHOLDER = re.compile(r"^(?:[*x•.]{3,}|<[^>]*>|\$\{[^}]*\}|\$[A-Z_][A-Z0-9_]*|\{\{.*\}\}|%\w|\?+)$", re.I)
_PATH = re.compile(r"^[\w.-]*(?:/[\w.-]+)+/?$")
_SEGMENT_SPLIT = re.compile(r"[_.+\-/~=]+")
_WORDISH = re.compile(r"[a-z]{2,}|[A-Z][a-z]+|[A-Z]{2,}|\d+|[A-Za-z0-9]{1,3}")

# --- card numbers ----------------------------------------------------------------------------

_CARD = re.compile(r"\d(?<![\w+#.-]\d)(?:[ -]?\d){12,18}(?![\w-]|\.\d)")
_CARD_GROUPS = frozenset({(4, 4, 4, 4), (4, 6, 5), (4, 6, 4), (4, 4, 4, 4, 3), (4, 4, 4, 1), (4, 4, 4, 4, 1),
                          (4, 4, 4, 3), (4, 4, 5), (4, 4, 4, 2)})
_NOT_CARD_CONTEXT = re.compile(
    r"(?i)(?:\b(?:order|invoice|tracking|ref(?:erence)?|confirmation|booking|account|isbn|id|no\.?|number)|#)"
    r"[\s:#.]*$"
)
_CARD_CONTEXT = re.compile(r"(?i)\b(?:card|visa|mastercard|amex|credit|debit|cc)\b")


def _card_spans(text: str) -> Iterator[tuple[int, int]]:
    for m in _CARD.finditer(text):
        raw = m.group(0)
        separators = set(raw) - set("0123456789")
        digits = raw.replace(" ", "").replace("-", "")
        if not 13 <= len(digits) <= 19 or digits[0] not in "23456" or not luhn_valid(digits):
            continue
        if separators:
            groups = tuple(len(g) for g in re.split(r"[ -]", raw))
            if len(separators) > 1 or groups not in _CARD_GROUPS:
                continue
        before = text[max(0, m.start() - 40):m.start()]
        if _NOT_CARD_CONTEXT.search(before) and not _CARD_CONTEXT.search(before):
            continue
        yield m.start(), m.end()


# --- keyword rules ---------------------------------------------------------------------------

@functools.lru_cache(maxsize=4096)
def _segments(identifier: str) -> tuple[str, ...]:
    """OPENAI_API_KEY -> [openai, api, key]; accessToken -> [access, token]; X-Api-Key -> [x, api, key]."""
    out: list[str] = []
    for part in re.split(r"[_-]+", identifier):
        out.extend(seg.casefold() for seg in _CAMEL.findall(part))
    return tuple(out)


def _clean_value(value: str) -> str:
    """Trailing sentence punctuation is prose, not part of an unquoted value."""
    return value.rstrip(".,;:)]}>")


def _looks_like_identifier(value: str) -> bool:
    """deploy_key_2024_production, v2.3.1-beta.4+build.20240101: words and numbers joined by
    separators name a thing; a random token mixes case and digits inside its segments."""
    segments = [seg for seg in _SEGMENT_SPLIT.split(value) if seg]
    return len(segments) >= 3 and all(_WORDISH.fullmatch(seg) for seg in segments)


def _looks_like_path(value: str) -> bool:
    """config/prod_secrets_2024.yaml, /var/run/secrets/token, https://... are places, not secrets."""
    if value.startswith(("/", "./", "~")) or "://" in value:
        return True
    if re.search(r"\.[a-z]{2,5}$", value):
        return True
    return bool(_PATH.match(value)) and any(re.fullmatch(r"[a-z]{4,}", seg) for seg in value.split("/"))


def _password_value(text: str, end: int, key: str) -> tuple[int, int] | None:
    m = _PASSWORD_TAIL.match(text, end)
    if m is None:
        return None
    if key == "pwd" and not re.match(r"[ \t\"']*[:=]", text[end:end + 8]):
        return None  # "run pwd to see where you are"
    group = next(i for i in (1, 2, 3, 4) if m.group(i) is not None)
    value = m.group(group)
    if _PLACEHOLDER.match(value):
        return None
    if group == 4:
        value = _clean_value(value)
    if not value or _PLACEHOLDER.match(value):
        return None
    if key == "pwd" and value.startswith(("/", "~", ".")):
        return None  # PWD=/home/ana is a working directory
    if value.casefold() in _PW_STOP or value.casefold().rstrip("!?") in _PW_STOP:
        return None
    return m.start(group), m.start(group) + len(value)


def _generic_value(text: str, end: int) -> tuple[int, int] | None:
    m = _GENERIC_TAIL.match(text, end)
    if m is None:
        return None
    value = _clean_value(m.group(1)).rstrip(".")
    if _looks_like_path(value) or _looks_like_identifier(value) or not looks_random(value):
        return None
    return m.start(1), m.start(1) + len(value)


def _keyword_candidates(text: str, lower: str, priority: int) -> Iterator[tuple[int, int, int, str]]:
    seen: set[int] = set()
    for hit in _KEYWORD_HINT.finditer(lower):
        head = _IDENT_HEAD.search(text, max(0, hit.start() - 64), hit.start())
        start = head.start() if head else hit.start()
        end = _IDENT_TAIL.match(text, hit.end()).end()  # type: ignore[union-attr]
        if start in seen:
            continue
        seen.add(start)
        segments = _segments(text[start:end])
        if not segments or set(segments) & _META:
            continue
        if _PW_WORDS.intersection(segments) or "pass" in segments[1:]:
            key = "pwd" if segments == ("pwd",) else "password"
            span = _password_value(text, end, key)
            if span:
                yield priority, span[0], span[1], "password"
        elif segments == ("pin",):
            m = _PIN_TAIL.match(text, end)
            if m:
                yield priority, m.start(1), m.end(1), "password"
        elif _SECRET_WORDS.intersection(segments):
            span = _generic_value(text, end)
            if span:
                if "key" in segments or "apikey" in segments:
                    kind = "api_key"
                elif "token" in segments or "auth" in segments:
                    kind = "token"
                else:
                    kind = "generic_secret"
                yield priority + 1, span[0], span[1], kind


# --- the scrubber ----------------------------------------------------------------------------

def _candidates(text: str) -> Iterator[tuple[int, int, int, str]]:
    """(priority, start, end, kind) for every rule hit; lower priority wins an overlap."""
    lower = text.lower()
    if len(lower) != len(text):  # a few characters grow when lower-cased (İ); stay aligned
        lower = text.translate({c: c + 32 for c in range(65, 91)})
    if "-----BEGIN" in text:
        for m in _PEM.finditer(text):
            yield 0, m.start(), m.end(), "private_key"
    if "://" in text:
        for m in _CONNECTION.finditer(text):
            if _SCHEME_BEFORE.search(text, max(0, m.start() - 32), m.start()) and not _PLACEHOLDER.match(m.group(1)):
                yield 1, m.start(1), m.end(1), "connection_string"
    for priority, rule in enumerate(_FORMATS, start=2):
        if rule.hint in (lower if rule.lower else text):
            for m in rule.pattern.finditer(text):
                if rule.check is None or rule.check(m.group(rule.group)):
                    yield priority, m.start(rule.group), m.end(rule.group), rule.kind
    base = 2 + len(_FORMATS)
    for start, end in _card_spans(text):
        yield base, start, end, "card_number"
    yield from _keyword_candidates(text, lower, base + 1)


def _mask(text: str) -> str:
    """Blank out markers and data URIs (same length, so offsets hold) so no rule fires inside."""
    if "[secret:" not in text and "base64," not in text:
        return text

    def blank(m: re.Match[str]) -> str:
        return _BLANK * len(m.group(0))

    return _DATA_URI.sub(blank, MARKER.sub(blank, text))


def find_secrets(text: str) -> list[Redaction]:
    """Every secret in `text`, in order, non-overlapping; offsets into `text`.

    A rule can lose an overlap and with it a shorter hit it would have found on its own
    ("sk-...-----BEGIN ..." loses to the PEM block), and a redaction changes its neighbours'
    boundaries ("4085-----BEGIN" is no card, "4085[secret:...]" is), so detection repeats with
    the chosen spans blanked until nothing new turns up: scrub(scrub(x)) == scrub(x)."""
    masked = _mask(text)
    starts: list[int] = []  # chosen spans, sorted and non-overlapping
    ends: list[int] = []
    kinds: list[str] = []
    for _ in range(8):
        new: list[tuple[int, int]] = []
        for _, start, end, kind in sorted(_candidates(masked), key=lambda c: (c[0], c[1])):
            if end <= start or _BLANK in masked[start:end]:
                continue
            i = bisect.bisect_left(starts, end)  # spans starting before our end
            if i and ends[i - 1] > start:
                continue
            starts.insert(i, start)
            ends.insert(i, end)
            kinds.insert(i, kind)
            new.append((start, end))
        if not new:
            break
        pieces, at = [], 0
        for start, end in sorted(new):
            pieces += [masked[at:start], _BLANK * (end - start)]
            at = end
        masked = "".join(pieces) + masked[at:]
    return [Redaction(kind, start, end) for start, end, kind in zip(starts, ends, kinds)]


def scrub(text: str) -> tuple[str, list[Redaction]]:
    """Replace every secret with `[secret:<kind>]`; return the new text and the redactions
    (offsets in the original text)."""
    redactions = find_secrets(text)
    if not redactions:
        return text, []
    parts: list[str] = []
    at = 0
    for r in redactions:
        parts.append(text[at:r.start])
        parts.append(marker(r.kind))
        at = r.end
    parts.append(text[at:])
    return "".join(parts), redactions
