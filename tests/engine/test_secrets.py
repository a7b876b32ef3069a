"""Secret scrubbing: every corpus secret goes with the right kind, every negative stays."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.extract.secrets import KINDS, MARKER, Redaction, luhn_valid, marker, scrub, shannon_entropy
from tests.engine.secrets_corpus import NEGATIVES, POSITIVES


def test_corpus_is_big_enough():
    assert len(POSITIVES) >= 40
    assert len(NEGATIVES) >= 40
    assert len({name for name, *_ in POSITIVES} | {name for name, _ in NEGATIVES}) == len(POSITIVES) + len(NEGATIVES)
    assert {kind for _, _, expected in POSITIVES for kind, _ in expected} == set(KINDS)


@pytest.mark.parametrize(("name", "text", "expected"), POSITIVES, ids=[p[0] for p in POSITIVES])
def test_true_positive_is_redacted_with_its_kind(name, text, expected):
    out, redactions = scrub(text)
    assert [(r.kind, text[r.start:r.end]) for r in redactions] == expected
    for kind, secret in expected:
        assert secret not in out
        assert marker(kind) in out


@pytest.mark.parametrize(("name", "text"), NEGATIVES, ids=[n[0] for n in NEGATIVES])
def test_true_negative_is_untouched(name, text):
    assert scrub(text) == (text, [])


def _rebuild(text: str, redactions: list[Redaction]) -> str:
    parts, at = [], 0
    for r in redactions:
        parts += [text[at:r.start], marker(r.kind)]
        at = r.end
    return "".join(parts) + text[at:]


@pytest.mark.parametrize(("name", "text", "expected"), POSITIVES, ids=[p[0] for p in POSITIVES])
def test_offsets_point_into_the_original_and_rebuild_the_output(name, text, expected):
    out, redactions = scrub(text)
    assert all(0 <= r.start < r.end <= len(text) for r in redactions)
    assert all(a.end <= b.start for a, b in zip(redactions, redactions[1:]))
    assert _rebuild(text, redactions) == out


def test_offsets_hold_when_secrets_sit_in_a_longer_document():
    text = "\n".join(t for _, t, _ in POSITIVES[:20]) + "\n" + "\n".join(t for _, t in NEGATIVES[:20])
    out, redactions = scrub(text)
    expected = [secret for _, _, exp in POSITIVES[:20] for _, secret in exp]
    assert [text[r.start:r.end] for r in redactions] == expected
    assert _rebuild(text, redactions) == out


@pytest.mark.parametrize(("name", "text", "expected"), POSITIVES, ids=[p[0] for p in POSITIVES])
def test_scrubbing_is_idempotent(name, text, expected):
    once, _ = scrub(text)
    assert scrub(once) == (once, [])


def test_markers_are_never_redacted_again():
    text = "password: [secret:password] token=[secret:token] api_key=[secret:api_key] [secret:card_number]"
    assert scrub(text) == (text, [])
    # A keyword inside a marker ("secret") must not pull the next value in.
    text = "[secret:api_key] Zm9vYmFyYmF6cXV4MTIzNDU2Nzg5MA"
    assert scrub(text) == (text, [])


_ALPHABET = st.sampled_from(list("abcXYZ019 :=-_/.@\n'\"") + ["password: ", "token=", "sk-", "[secret:token]", "4358 "])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_ALPHABET, st.sampled_from([t for _, t, _ in POSITIVES] + [t for _, t in NEGATIVES])),
                max_size=12).map("".join))
def test_property_idempotent_and_offsets_consistent(text):
    out, redactions = scrub(text)
    assert _rebuild(text, redactions) == out
    assert scrub(out) == (out, [])
    # Every marker in the output is either from the input or from a redaction.
    assert len(MARKER.findall(out)) == len(MARKER.findall(text)) + len(redactions)


def test_helpers():
    assert luhn_valid("4358791617918218") and not luhn_valid("4358791617918219")
    assert shannon_entropy("") == 0.0 and shannon_entropy("aaaa") == 0.0
    assert shannon_entropy("abcd") == pytest.approx(2.0)


def test_empty_and_plain_text():
    assert scrub("") == ("", [])
    assert scrub("hello") == ("hello", [])
