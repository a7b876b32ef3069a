"""The offline extractor's change frames: each phrasing class, and each non-change it must refuse."""

from __future__ import annotations

import pytest

from engine.extract.heuristic import extract
from engine.extract.model import SourceChunk


def updates(text: str, speaker: str = "user") -> list[tuple[str, str, str | None]]:
    body = f"{speaker}: {text}"
    chunk = SourceChunk(1, 1, body, 0, len(body), speaker, "user", "user", "2024-06-01T10:00:00Z")
    return [(c.predicate_key, c.object, c.replaces) for c in extract(chunk) if c.relation == "updates"]


@pytest.mark.parametrize("text, expected", [
    ("I moved to Munich last week.", ("lives_in", "Munich", None)),
    ("We relocated to Manchester for my partner's job.", ("lives_in", "Manchester", None)),
    ("I switched from VS Code to Neovim over the summer.", ("uses_tool", "Neovim", "VS Code")),
    ("I changed my major from law to philosophy.", ("studies", "philosophy", "law")),
    ("My doctor switched me from sertraline to escitalopram.", ("uses_tool", "escitalopram", "sertraline")),
    ("I replaced Evernote with Obsidian.", ("uses_tool", "Obsidian", "Evernote")),
    ("Traded in the Civic for a Subaru Outback, we needed the space.", ("uses_tool", "Subaru Outback", "Civic")),
    ("I sold the Golf and bought a Tesla Model 3 in June.", ("owns", "Tesla Model 3", "Golf")),
    ("I left Acme and joined Globex last month.", ("works_at", "Globex", "Acme")),
    ("Closed my Barclays account and opened one at Monzo.", ("uses", "Monzo", "Barclays account")),
    ("I cancelled PureGym and signed up at CrossFit Kreuzberg.", ("uses", "CrossFit Kreuzberg", "PureGym")),
    ("I quit tennis after my elbow injury, it's only padel for me now.", ("does", "padel", "tennis")),
    ("I stopped running after my knee surgery; swimming is my thing now.", ("does", "swimming", "running")),
    ("I gave up knitting, my hands hurt too much.", ("does", "not knitting", "knitting")),
    ("Six months without a cigarette, I quit smoking for good!", ("does", "not smoking", "smoking")),
    ("I quit my job at Google.", ("works_at", "not Google", "Google")),
    ("Confession: I'm not vegetarian anymore.", ("does", "not vegetarian", "vegetarian")),
    ("Not using Windows anymore at home.", ("does", "not Windows", "Windows")),
    ("I no longer need metformin.", ("does", "not metformin", "metformin")),
    ("I used to drink coffee, now I drink green tea.", ("does", "green tea", "coffee")),
    ("My new phone is an iPhone 15 and the camera is unreal.", ("phone", "iPhone 15", None)),
    ("Got a new SIM, my number is now 0151 5550 9876.", ("number", "0151 5550 9876", None)),
    ("We moved! New address: 48 Oak Avenue, Shelbyville.", ("address", "48 Oak Avenue, Shelbyville", None)),
])
def test_change_frames(text, expected):
    assert expected in updates(text)


@pytest.mark.parametrize("text", [
    "My sister just moved to Paris.",  # someone else's change
    "My husband left Google and joined a tiny startup.",
    "My dad sold his old Mercedes and bought a BMW i4.",
    "I might switch from Vim to Emacs.",  # plans and hypotheticals
    "If I leave Acme I'll join Globex.",
    "I'm thinking of quitting nursing.",
    "I was in Porto last week.",  # a visit
    "We rented a Jeep Wrangler for the road trip.",
    "Actually we're staying in Berlin, the Hamburg deal fell through.",  # a retraction changes nothing new
    "Should I switch from Windows to Linux?",
    "Ordered a MacBook Air to replace the ThinkPad!",  # "to replace": a purpose, not a change yet
])
def test_non_changes_update_nothing(text):
    assert updates(text) == []


def test_a_state_of_an_attribute_is_a_new_fact_and_its_change_an_update():
    body = "user: My car is a 2012 VW Golf, it has been super reliable."
    (c,) = extract(SourceChunk(1, 1, body, 0, len(body), "user", "user", "user", "2024-01-01T00:00:00Z"))
    assert (c.predicate_key, c.object, c.relation) == ("car", "2012 VW Golf", "new")


def test_an_ending_and_a_new_value_in_one_sentence_are_one_update():
    assert updates("I no longer work at Google, I now work at Meta.") == [("works_at", "Meta", "Google")]
