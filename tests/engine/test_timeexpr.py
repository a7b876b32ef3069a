"""The one date grammar: times a turn names, resolved against the time it was said."""

from datetime import UTC, datetime

import pytest

from engine.timeexpr import mentions, stored_rows

MONDAY = datetime(2023, 5, 15, 13, 0, tzinfo=UTC)  # Monday 15 May 2023


def resolved(text, ref=MONDAY):
    return [(m.text, m.window_start.date().isoformat(), m.window_end.date().isoformat()) for m in mentions(text, ref)]


@pytest.mark.parametrize("text, expected", [
    ("I went hiking last Saturday with my kids.", [("last Saturday", "2023-05-13", "2023-05-14")]),
    ("We met on Saturday.", [("on Saturday", "2023-05-13", "2023-05-14")]),
    ("Yesterday I painted a sunrise.", [("Yesterday", "2023-05-14", "2023-05-15")]),
    ("I joined the group two weeks ago", [("two weeks ago", "2023-04-28", "2023-05-05")]),
    ("a couple of days ago it rained", [("a couple of days ago", "2023-05-13", "2023-05-14")]),
    ("Last month I visited Paris.", [("Last month", "2023-04-01", "2023-05-01")]),
    ("last week was busy", [("last week", "2023-05-08", "2023-05-15")]),
    ("last weekend we camped", [("last weekend", "2023-05-13", "2023-05-15")]),
    ("last year I ran a marathon", [("last year", "2022-01-01", "2023-01-01")]),
    ("next week we fly", [("next week", "2023-05-22", "2023-05-29")]),
    ("On 5 June 2023 we fly", [("5 June 2023", "2023-06-05", "2023-06-06")]),
    ("It was on the 3rd of July", [("3rd of July", "2023-07-03", "2023-07-04")]),  # nearest 3 July to May 2023
    ("Back in December, I quit", [("in December", "2022-12-01", "2023-01-01")]),  # nearest December
    ("in March 2021 I moved", [("March 2021", "2021-03-01", "2021-04-01")]),
    ("we moved in 2019", [("in 2019", "2019-01-01", "2020-01-01")]),
    ("I moved to Munich last spring.", [("last spring", "2022-03-01", "2022-06-01")]),  # still spring now
    ("we hiked there last summer", [("last summer", "2022-06-01", "2022-09-01")]),
    ("this summer we sail", [("this summer", "2023-06-01", "2023-09-01")]),
    ("last winter was cold", [("last winter", "2022-12-01", "2023-03-01")]),
])
def test_a_turn_time_resolves_against_when_it_was_said(text, expected):
    assert resolved(text) == expected


@pytest.mark.parametrize("text", [
    "I go to yoga on Saturdays",  # a habit names no one day
    "May I ask you something?",  # a verb, not a month
    "I met May at the bakery",  # a name
    "We had two dogs and a cat",
])
def test_what_is_not_a_time_is_not_resolved(text):
    assert mentions(text, MONDAY) == []


def test_without_a_reference_only_absolute_times_resolve():
    assert [m.text for m in mentions("Yesterday, on 5 June 2023, in 2019", None)] == ["5 June 2023", "in 2019"]


def test_stored_rows_are_chunk_offsets_and_store_times():
    text = "Hi! Yesterday I adopted a cat."
    rows = stored_rows(text, "2023-05-15T13:00:00Z")
    assert rows == [(4, 13, "Yesterday", "day", "2023-05-14T00:00:00Z", "2023-05-15T00:00:00Z")]
    assert text[rows[0][0]:rows[0][1]] == "Yesterday"
    assert stored_rows(text, "not a time") == []  # an unreadable time resolves nothing relative


def test_a_count_past_any_calendar_is_not_a_time_and_breaks_nothing_else():
    # found in LongMemEval S dev60: a turn saying this stopped its whole benchmark run
    found = mentions("That was 10000 years ago; in 9000 years, who knows. Two weeks ago I moved.", MONDAY)
    assert [m.text for m in found] == ["Two weeks ago"]


def test_month_names_are_read_by_the_one_table():
    from engine.timeexpr import month_number

    assert [month_number(w) for w in ("May", "may", "Sept.", "sep", "DECEMBER", "Febr")] == [5, 5, 9, 9, 12, 2]
    assert month_number("Ju") is None and month_number("Smarch") is None


def test_one_iso_format_with_a_four_digit_year():
    from datetime import datetime, timedelta, timezone

    from engine.timeutil import to_iso

    assert to_iso(datetime(999, 1, 2, 3, 4, 5)) == "0999-01-02T03:04:05Z"
    assert to_iso(datetime(2024, 3, 1, 10, 0, tzinfo=timezone(timedelta(hours=2)))) == "2024-03-01T08:00:00Z"
