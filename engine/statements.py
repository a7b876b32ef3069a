"""How a statement stands: whom it is about, and whether it says that something changed.

One small grammar, shared by the offline extractor (engine/extract/heuristic.py: a change frame
supersedes only when its clause is the speaker's own, asserted, and not a visit) and by recall
(engine/retrieve/pipeline.py: where no fact links two statements, a later one leads an earlier
one only when it states a change for the person the question asks about).

A turn is cut into clauses (at punctuation and at "and", "but", "so", "because", ...). Each
clause gets:

- a subject: `self` (I, we, "Sarah and I", a clause that starts with a past verb as chat drops
  its "I": "Packed up and moved to Denver", an instruction: "Ship it to 14 Elm Road", "it's the
  tram for me now"), `thing` (the speaker's own thing: "my new phone", "our address", "the rent",
  "there's an induction hob", "Spotify is history, it's Apple Music now"; the words of its phrase
  are `nouns`: "our gas stove" -> gas, stove), `person` with a key ("my sister" -> sister, "Tom"
  -> tom, "there's a new puppy" -> puppy), or `pronoun` (he, she, they);
- flags: `question`; `modal` (a plan, wish or hypothetical: might, would, 'll, going to,
  thinking of, considering, if, "moving next month", "we're selling the Golf", "changes ... on
  Monday"); `visit` (a stay, a stand-in or a one-off: was in, visited, a trip, a holiday, rented,
  borrowed, tried, spent two weeks in, travelling, dog-sitting, a courtesy car, until the end of
  the month); `retracts` (takes a change back: actually, after all, never mind, fell through);
  `change` (moved, switched, replaced, sold, left, joined, quit, stopped, gave up, got rid of,
  ended up going with, let go, ripped out, put the rent up, hit 72 kilos, they made me, no
  longer, not ... anymore, used to, now, new, instead, since, from now on, X is history).

A clause *states a change* when it is not a question, not modal and not a visit, and it
changes or retracts something. Whose change it is comes from its subject: see `changes_for`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from .memo import LRU, text_key
from .timeutil import month_number

# Nouns that name someone other than the speaker ("my sister moved to Paris" is her change).
PERSON_NOUNS = frozenset("""sister brother mom mum mother dad father parent parents wife husband partner
    girlfriend boyfriend fiance fiancé fiancee fiancée spouse friend bestie neighbour neighbor colleague
    coworker co-worker roommate flatmate housemate boss manager son daughter kid kids child children baby
    cousin uncle aunt niece nephew grandma grandpa grandmother grandfather grandparents family in-laws
    classmate teammate mate doctor landlord landlady teacher coach ex team lab""".split())
# Animals a question can ask about ("what is my parrot called?"): dependants, like children.
PET_NOUNS = frozenset("""dog puppy pup cat kitten parrot bird hamster rabbit bunny guinea pig fish turtle horse
    pony snake lizard ferret gecko budgie""".split())
# Their changes are the speaker's too: a new baby, a new pet ("how many kids do I have?").
DEPENDANTS = frozenset({"son", "daughter", "kid", "kids", "child", "children", "baby"}) | PET_NOUNS
# People whose role is to set the speaker's terms: what they change of the speaker's things is the
# speaker's change ("the landlord put the rent up"); family and friends change their own.
_PROVIDERS = frozenset("landlord landlady doctor boss manager teacher coach team lab".split())
# "our team replaced Trello": a group the speaker is in.
_GROUPS = frozenset("team family household company office department group band class crew".split())
_MONTHS = frozenset("""january february march april may june july august september october november december
    jan feb mar apr jun jul aug sep sept oct nov dec""".split())

_SELF = re.compile(r"(?i)^(?:i|i'm|i’m|i've|i’ve|i'd|i’d|i'll|i’ll|im|ive|we|we're|we’re|we've|we’ve|we'd|"
                   r"we’d|we'll|we’ll|me|us)$")
_PRONOUN = frozenset("he she they it he's she's they're it's his hers its you you're".split())
# Words that may open a clause before its subject ("Update from our side: we ...", "So I ...").
_LEAD = frozenset("""so and but well oh ok okay yeah yes yep also actually btw fyi anyway honestly basically
    then now today recently lately nowadays currently finally just yesterday big news update heads up confession
    plot twist good great quick note ps hey hi hello guess what turns out sadly luckily unfortunately fortunately
    officially alright right last this past week month year weekend ago as of since in on at few
    couple two three four five six months weeks days years please""".split()) | _MONTHS
_PAST_IRREGULAR = frozenset("""got went sold bought left quit made took began became gave dropped found put
    spent brought kept ran rode drove flew met lost won wrote read sent set shut split swapped traded
    tried moved closed opened signed picked packed started finished ordered returned rented borrowed
    cancelled canceled switched changed replaced joined stopped adopted renamed retired handed dumped
    ditched upgraded transferred enrolled graduated married divorced hit paid grew fell""".split())
_NOT_PAST = frozenset("""need seed feed bed red shed speed weed bleed breed indeed""".split())
# An instruction states the speaker's own details: "Ship it to 14 Elm Road", "use sam@reyes.co".
_IMPERATIVE = frozenset("""send ship deliver post mail email text call ring phone contact reach use bill charge
    invoice address forward""".split())
# "Spotify is history", "the Vespa's gone": a named thing that ended, not a person's act.
_ENDED = frozenset("history gone over done dead out finished".split())
# Words that say nothing of which thing a clause is about ("the rent is" / "how much rent do we pay").
_FUNCTION = frozenset("""the a an my our your his her their its this that these those is are was were be been
    being am has have had do does did of to in on at for from with by and or but so as it i we you me us
    what which who where when why how much many new old""".split())
# ... and the words that name no slot and no value of it either ("now", "still", "yes"): what a
# claim's slot terms leave out (recall's same_slot)
SLOT_FUNCTION = _FUNCTION | frozenset("""all also any here i'm i've it's just more most no nope not now one really
    some still than that's then there there's too very we're we've yeah yes yet""".split())

_CLAUSE_BREAK = re.compile(r"(?<!\d),|,(?!\d)|(?<!\d):|:(?!\d)|[;!?()\[\]—–]+|\.(?:\s|$)|\s-\s|\n"
                           r"|\b(?:and|but|so|because|cause|though|although|while|whereas|plus|then)\b"
                           r"|(?=\b(?:if|unless|whenever)\b)", re.I)  # these stay in their clause: its mood
_WORD = re.compile(r"[\w'’-]+")

MODAL = re.compile(
    r"(?i)\b(?:might|(?-i:may)|could|would|should|will|won['’]t|shall|gonna|wanna|going\s+to|plan(?:s|ning)?\s+(?:to|on)"
    r"|intend(?:s|ing)?\s+to|thinking\s+(?:of|about)|considering|consider|hop(?:e|es|ing)\s+to|want(?:s|ed)?\s+to"
    r"|wish|if|unless|someday|some\s+day|one\s+day|maybe|perhaps|dream(?:ing)?\s+of|about\s+to|supposed\s+to"
    r"|in\s+case)\b|['’](?:ll|d)\b")
# a hope, not yet a fact: "we've put an offer in on a house in Frome, fingers crossed"
HOPE = re.compile(r"(?i)\b(?:fingers\s+crossed|hopefully|wish\s+(?:me|us)\s+luck|touch\s+wood)\b")
# "moving to Hamburg in June", "starting next month": a change still to come.
_FUTURE_ING = re.compile(
    r"(?i)\b(?:moving|relocating|leaving|starting|switching|quitting|joining|transferring|changing|getting|heading"
    r"|going|selling|buying|retiring|separating|applying)\b.*\b(?:next|soon|tomorrow|tonight|later|upcoming"
    r"|in\s+(?:a|two|three|\d+)\s+(?:days?|weeks?|months?|years?)"
    r"|(?:in|on|by|from|come)\s+(?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december|spring|summer|autumn|fall|winter|monday|tuesday|wednesday|thursday|friday|saturday|sunday))\b")
# "We're selling the Golf and getting a Kia": a change arranged, not made (unless it holds "now").
_ARRANGED = re.compile(
    r"(?i)^\W*(?:\w+\s+){0,3}?(?:i['’]m|i\s+am|we['’]re|we\s+are|im)\s+(?:\w+ly\s+)?"
    r"(?:selling|buying|getting|moving"
    r"|relocating|leaving|switching|quitting|changing|swapping|trading|handing|joining|transferring|replacing"
    r"|cancelling|canceling)\b(?!.*\b(?:now|these\s+days|nowadays)\b)")
# "Our landline changes to ... on Monday": a present-tense change with a time still to come.
_FUTURE_PRESENT = re.compile(
    r"(?i)\b(?:changes|moves|switches|starts|begins|ends|goes\s+up|goes\s+down|rises|drops)\b.*\b(?:next|tomorrow"
    r"|(?:on|from|by)\s+(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|the\s+\d+\w*|\d+\w*)"
    r"|in\s+(?:a|two|three|\d+)\s+(?:days?|weeks?|months?))\b")
# Not a claim about the world: "I'm not sure yet", "no idea".
# Or that nothing has changed yet: "not doing anything yet", "haven't moved yet", "just thinking out loud".
HEDGE = re.compile(r"(?i)\b(?:not\s+sure|unsure|no\s+idea|(?:don['’]t|do\s+not)\s+know|undecided|on\s+the\s+fence"
                   r"|(?:not|n['’]t)\s+(?:[\w'’]+\s+){0,3}?yet|nothing\s+(?:[\w'’]+\s+){0,2}?yet|thinking\s+out\s+loud)\b")
VISIT = re.compile(
    r"(?i)\b(?:(?:was|were)\s+(?:in|at|over\s+in|down\s+in|up\s+in)\s|visit(?:ed|ing)?|trip|holiday|vacation"
    r"|conference|spent\s+(?:a|an|one|two|three|four|five|six|\d+|the|last|a\s+few|a\s+couple\s+of)\s+"
    r"(?:\w+\s+)?(?:days?|weeks?|nights?|months?|weekend)\s+(?:in|at)|rented|borrowed|tried|stayed\s+(?:in|at|with)"
    r"|staying\s+with|for\s+the\s+weekend|one-off|just\s+once|this\s+once|went\s+to|secondment|taster"
    # a stay or a stand-in that ends: "while I'm travelling", "dog-sitting", "until the end of the month"
    r"|travell?ing|(?:dog|house|pet|cat|baby)-?sitting|looking\s+after|until\s+the\s+end\s+of|for\s+the\s+time\s+being"
    r"|temporar(?:y|ily)"
    # a stand-in while the speaker's own thing is away: "a courtesy car while the Yaris gets fixed"
    r"|courtesy\s+car|loan(?:er)?\s+car|hire\s+car|(?:at|in)\s+the\s+(?:repair\s+shop|shop|garage)"
    r"|(?:being\s+)?(?:fixed|repaired|serviced))\b")
_DAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday|mon|tue|tues|wed|thu|thurs|fri|sat|sun)"
# A stay or a stand-in is temporary, whatever verb tells it: read from what bounds it. Each
# marker is named (the reason a statement does not replace the state it seems to).
_TEMPORARY = (
    # an end given with it: "till Sunday", "until mine comes back", "Monday to Thursday", "this week"
    ("a stated end", re.compile(
        rf"(?i)\b(?:till|until|untill|til)\b|\b{_DAY}\s+(?:to|through|till|-)\s+{_DAY}\b"
        r"|\bthis\s+(?:week|month)\s+only\b|\bthe\s+whole\s+(?:week|weekend|fortnight)\b"
        # "this week I'm in Glasgow", "we're at the coast this weekend": a presence this week, not
        # "as of this week I work for Feast"
        r"|\b(?:this|next)\s+(?:week|weekend|fortnight)\s+(?:i['’]m|we['’]re|i\s+am|we\s+are)\s+(?:in|at|staying|over|down|up)\b"
        r"|\b(?:i['’]m|we['’]re|i\s+am|we\s+are)\s+(?:in|at|staying|over|down|up)\b[^.!?]*\b(?:this|next)\s+(?:week|weekend|fortnight)\b"
        # "working from the Paris office this month", "for now", "for a bit"
        r"|\b(?:working|staying|living|based|camping|stopping)\s+(?:from|in|at|out\s+of|with)\b[^.!?]*"
        r"\bthis\s+(?:week|weekend|month|fortnight)\b"
        r"|\bfor\s+(?:now|a\s+bit|a\s+little\s+while)\b")),
    # a trial, not a choice: "a free trial of Notion", "a test drive in the new Kia"
    ("a trial", re.compile(r"(?i)\b(?:free\s+)?trial\b|\btest[-\s]drive|\bdemo\b")),
    # a short stated duration: "for the fortnight", "two weeks in Tokyo", "for a few nights"; not
    # "have lived here for two years", a state that holds
    ("a short stay", re.compile(
        # not a habit's rate: "three mornings a week at the pool", "two days a week at the office"
        r"(?i)(?<!twice\s)(?<!once\s)(?<!times\s)(?<!per\s)(?<!every\s)(?<!days\s)(?<!mornings\s)(?<!evenings\s)"
        r"(?<!nights\s)(?<!afternoons\s)(?<!sessions\s)(?<!shifts\s)(?<!hours\s)(?<!classes\s)\b(?:for\s+)?(?:the|a|one|two|three|four|five|six|a\s+few|a\s+couple\s+of|\d+)\s+"
        r"(?:days?|nights?|weeks?|fortnight)\s+(?:in|at|with|on|away|off)\b"
        r"|\bfor\s+(?:the|a|one|two|three|a\s+few|a\s+couple\s+of|\d+)\s+(?:days?|nights?|weeks?|fortnight|weekend)\b"
        # "for the month", "for the next three weeks": a stay with its length given
        r"|\bfor\s+(?:the|a|one)\s+month\b|\bfor\s+the\s+(?:next|coming)\s+(?:few\s+|couple\s+of\s+|\w+\s+)?(?:days|weeks)\b")),
    # a way back: "back from two weeks in Tokyo", "then home", "back Monday", "back to normal"
    ("a return", re.compile(
        rf"(?i)\b(?:just\s+)?(?:back|home)\s+from\b|\bgot\s+back\b|\bthen\s+(?:home|back)\b"
        rf"|\bback\s+(?:on\s+)?{_DAY}\b|\bback\s+to\s+normal\b|\bflying\s+(?:out|back|home)\b")),
    # someone else's place or thing, or while something of theirs lasts: "at my mum's in Swansea",
    # "at a friend's", "driving my brother's Tesla", "while she recovers"
    ("someone else's place or thing", re.compile(
        r"(?i)\bat\s+(?:my|our|a|his|her|their)\s+(?:[\w-]+\s+)?[\w-]+['’]s?(?!\w)"
        r"|\b(?:driving|using|borrowing|riding|on)\s+(?:my|our|a)\s+[\w-]+['’]s\b"
        r"|\bwhile\s+(?:she|he|they|mine|my|our|his|her|their|the|i['’]m\s+away|we['’]re\s+away)\b")),
    # an occasion that ends: "for Christmas", "over the holidays", "for the wedding", "on tour"
    ("an occasion", re.compile(
        r"(?i)\b(?:for|over|during|until\s+after)\s+(?:the\s+)?(?:christmas|easter|new\s+year|holidays|half[-\s]term"
        r"|summer\s+holidays|wedding|funeral|festival|conference|tournament|season)\b|\bon\s+tour\b"
        r"|\bspending\s+(?:christmas|easter|the\s+holidays|new\s+year|the\s+weekend|a\s+few)\b")),
    # travelling: "business travel", "a work trip", "jet lag", "the hotel"
    ("travel", re.compile(
        r"(?i)\b(?:business\s+travel|(?:work|business|road)\s+trip|jet\s*lag|the\s+hotel|an?\s+hotel|airbnb|hostel"
        r"|abroad|on\s+the\s+road|away\s+(?:in|at|for|on))\b")),
)
_STATE_HELD = re.compile(r"(?i)\b(?:have|'ve|’ve|has|had)\s+(?:been|lived|worked|had|owned|used)\b")


# "I work at my dad's shop", "we live at my parents' now": a place of theirs can be one's own state
_SETTLED = re.compile(r"(?i)\b(?:live|lives|living|work|works|working|job|moved|now)\b")


def temporary(text: str) -> str | None:
    """Why a statement tells a stay or a stand-in that ends (a visit, not a move), or None: a
    stated end, a short stated duration, a return, someone else's place or thing, travel."""
    if _STATE_HELD.search(text):
        return None  # "I've lived here for two weeks now": a state that holds
    for reason, pattern in _TEMPORARY:
        if pattern.search(text) and not (reason == "someone else's place or thing" and _SETTLED.search(text)):
            return reason
    return None


RETRACTS = re.compile(
    r"(?i)\b(?:actually,?\s+(?:we|i)(?:['’]re|['’]m|\s+are|\s+am)?\s+(?:staying|not|still|keeping|back|decided)"
    r"|after\s+all|never\s*mind|fell\s+through|pulled\s+out|called\s+(?:it\s+)?off|changed\s+"
    r"(?:my|our)\s+minds?|decided\s+(?:to\s+stay|against)|staying\s+(?:put|in|at|on|with)|still\s+(?:in|at|with|on)"
    r"|turned\s+(?:\w+\s+){0,3}down|returned\s+the|back\s+(?:on|to|at|with)|talked\s+it\s+out|another\s+go"
    # a return to a habit: "back playing on Wednesdays", "running again"
    r"|back\s+\w+ing|\w+ing\s+again"
    r"|not\s+\w+ing\s+after\s+all|scratch\s+that|ignore\s+(?:that|my\s+last)|forget\s+(?:that|what\s+i\s+said)"
    r"|same\s+(?:old\s+)?\w+\s+as\s+before|keeping\s+the\s+old)\b")
# A clause that says the speaker is back, still or again in a state (recall's return_to_held and
# return_restores).
RETURNS = re.compile(r"(?i)\b(?:back|again|still)\b")
# A change that stops a state ("quitting five-a-side", "no more glasses", "we're separating"): a
# return after it restores what held before (recall's return_restores).
STOPS = re.compile(r"(?i)\b(?:quit|quitting|stopp(?:ed|ing)|gave\s+up|giv(?:en|ing)\s+up|no\s+more|no\s+longer"
                   r"|any\s*more|cancell?(?:ed|ing)|broke\s+up|split\s+up|separat(?:ed|ing)|divorc(?:ed|ing)"
                   r"|dropp(?:ed|ing)\s+out|done\s+with)\b")


def stopping(texts: list[str]) -> str | None:
    """The first of a change's clauses that stops a state (STOPS), or None."""
    return next((t for t in texts if STOPS.search(t)), None)


def returning(texts: list[str]) -> str | None:
    """The first of a change's clauses that returns to a state ("back swimming", "another go"), or None."""
    return next((t for t in texts if RETURNS.search(t) or RETRACTS.search(t)), None)


CHANGE = re.compile(
    r"(?i)\b(?:moved|relocated|switched|changed|replaced|swapped|traded|sold|left|joined|quit|quitting|stopped"
    r"|gave\s+up|given\s+up|giving\s+up|dropped|ditched|dumped|cancell?ed|closed|started|began|become|became|adopted|renamed"
    r"|retired|transferred|signed\s+up|picked\s+up|upgraded|downgraded|broke\s+up|split\s+up|divorced|separated"
    r"|married|engaged|proposed|promoted|promotion|hired|resigned|handed\s+in|graduated|enrolled|arrived"
    r"|put\s+(?:me|us)\s+on(?:to)?|signed\s+(?:for|the\s+lease)"
    r"|passed\s+away|died|bought|got\s+(?:a|an|my|myself|the)\s+new|got\s+(?:married|engaged|divorced|hired"
    r"|promoted|accepted)|no\s+longer|any\s*more|no\s+more|used\s+to|these\s+days|nowadays|now(?!\s+that)|instead"
    # choosing, ending, losing: "ended up going with", "got rid of", "was let go", "we lost Max"
    r"|ended\s+up\s+(?:going\s+with|with|getting|buying|choosing|picking|taking)|went\s+with|opted\s+for"
    r"|settled\s+on|got\s+rid\s+of|let\s+(?:(?:me|us)\s+)?go|laid\s+off|made\s+redundant|fired|sacked|took\s+in"
    # "we lost Max", "I lost my job"; not "lost touch", "lost the match"
    r"|lost\s+(?:(?-i:[A-Z])\w+|my|our)"
    # fittings and amounts: "the boiler was ripped out", "put the rent up to", "down to 86 kilos"
    r"|ripped\s+out|torn\s+out|taken\s+out|removed|installed|fitted|put\s+in|raised|increased|reduced"
    r"|decreased|doubled|halved|(?:went|gone|goes)\s+up|put\s+(?:[\w'’-]+\s+){0,2}up|(?:went|gone|came)\s+down"
    r"|(?:up|down)\s+to\s+\d+|(?:hit|reached|got\s+to)\s+(?:\w+\s+)?\d+"
    r"|(?:got|was|been|were)\s+(?:cut|axed|scrapped|discontinued|shut\s+down)|from\s+now\s+on"
    r"|(?:is|are|'s|’s)\s+(?:history|over|a\s+thing\s+of\s+the\s+past)"
    # someone else's act on the speaker: "they made me head of sales", "the GP took me off it"
    r"|(?:made|promoted|appointed|hired|put|switched|moved|transferred)\s+(?:me|us)\b"
    # a state that began and holds: "have been freelancing since"
    r"|since\s*$"
    r"|done\s+with|as\s+of|officially|off\s+(?:coffee|meat|alcohol|sugar|dairy)|gone|settled|turned\s+\w+"
    r"|went\s+(?:fully\s+|completely\s+)?(?:vegan|vegetarian|pescatarian|keto|plant-based|freelance|part-time"
    r"|full-time|back)"
    # the start of a new state: "first week at the new gig", "Ella's first term at Brookfield"
    r"|first\s+(?:day|week|month|term|semester|year|shift|weeks|months)\s+(?:at|in|of|as|with)"
    # "new" as a thing's new value ("my new phone", "the new gig", "someone new", "New address:"),
    # not "new reads" or "not much is new"
    r"|(?:my|our|the|a|an|his|her|their|\w+['’]s)\s+(?:brand\s+)?new|someone\s+new|^new(?=\s+\w+\s*$|\s+\w+\s+signed)"
    # "since September I've been", "since the summer": a state that began then, not "since I was 17"
    r"|since\s+(?:(?:the|last|this)\s+)?(?:january|february|march|april|may|june|july|august|september|october"
    r"|november|december|spring|summer|autumn|fall|winter|new\s+year|then|(?:19|20)\d\d|last\s+\w+))\b")
# What takes back a change just told, in the same conversation ("New number: ...", then "Scratch
# that, the SIM didn't work, same old number as before"): RETRACTS without its re-assertions
# ("back to", "still in"), which in free chat as often just return to a topic.
TAKES_BACK = re.compile(
    r"(?i)\b(?:scratch\s+that|never\s*mind|forget\s+(?:that|what\s+i\s+said)|ignore\s+(?:that|my\s+last)"
    r"|after\s+all|fell\s+through|called\s+(?:it\s+)?off|changed\s+(?:my|our)\s+minds?|same\s+(?:old\s+)?\w+\s+as\s+before"
    r"|keeping\s+the\s+old|(?:didn['’]t|did\s+not|won['’]t|isn['’]t)\s+(?:work|happen|go\s+through)(?:\s+out)?)\b")


def takes_back(text: str) -> str | None:
    """The asserted clause of a text that takes back a change just told, or None."""
    for c in clauses(text):
        if not (c.question or c.modal) and TAKES_BACK.search(c.text):
            return c.text
    return None


# What takes back a change told in an earlier conversation ("We're moving to Munich!", a month
# later "Actually we're staying in Berlin"; "The MX-5 deal fell through, I've still got the
# Civic"): TAKES_BACK and the re-assertions of what held ("actually we're staying", "staying put",
# "decided against", "turned it down"), which across conversations need the change named too
# (takes_back_change).
_LATER_TAKES_BACK = re.compile(
    r"(?i)\b(?:actually,?\s+(?:we|i)(?:['’]re|['’]m|\s+are|\s+am)?\s+(?:staying|not|still|keeping|decided)"
    r"|decided\s+(?:to\s+stay|against)|staying\s+put|pulled\s+out|turned\s+(?:\w+\s+){0,3}down)\b")
_NAMING_FUNCTION = frozenset("""said say what about going got get getting still deal plan plans news""".split())


def content_words(text: str) -> set[str]:
    """The words of a text that can name a thing or a value (not function words, not lead words)."""
    words = {w.casefold().replace("’", "'").removesuffix("'s") for w in _WORD.findall(text)}
    return {w for w in words if len(w) > 2 and w not in SLOT_FUNCTION and w not in _LEAD
            and w not in _NAMING_FUNCTION and not CHANGE.fullmatch(w)}


def takes_back_later(text: str) -> str | None:
    """The asserted clause of the speaker's own that takes back a change told before (TAKES_BACK
    or a re-assertion of what held: "Actually we're staying in Berlin"), or None; what it takes
    back must still be named (takes_back_change)."""
    if not (TAKES_BACK.search(text) or _LATER_TAKES_BACK.search(text)):
        return None
    for c in clauses(text):
        if (not (c.question or c.modal) and c.subject in ("self", "thing", "none")
                and (TAKES_BACK.search(c.text) or _LATER_TAKES_BACK.search(c.text))):
            return c.text
    return None


def takes_back_change(text: str, named: str) -> str | None:
    """The asserted clause of a text told in a later conversation that takes back a change, naming
    it or what it replaced (`named`: their texts), or None. "Actually we're staying in Berlin"
    takes back "we're moving to Munich" told beside "we live in Berlin"; "actually we're staying"
    about another thing does not."""
    clause = takes_back_later(text)  # read first: most turns take nothing back
    return clause if clause is not None and content_words(text) & content_words(named) else None


# Words that add to what holds instead of replacing it: "I also adopted a cat", "a cat as well",
# "in addition to Rex". A clause with one states no change, whatever its verb.
ADDITIVE = re.compile(r"(?i)\b(?:also|as\s+well|in\s+addition|additionally|on\s+top\s+of|besides|too\s*[.!]*$)")
# Someone else's act that changes the speaker's state: "the neurologist put me on sumatriptan".
_DONE_TO_SPEAKER = re.compile(r"(?i)\b(?:(?:put|switched|moved|transferred|changed|took)\s+(?:me|us)"
                              r"\s+(?:on|off|to|from|onto)|(?:made|promoted|appointed|hired)\s+(?:me|us)\b"
                              r"|let\s+(?:me|us)\s+go)")
_QUESTION_OPEN = re.compile(
    r"(?i)^(?:what|which|who|whom|whose|where|when|why|how|can|could|would|will|should|do|does|did|is|are|am"
    r"|any|anyone|anybody|have\s+you|got\s+any)\b")


@dataclass(frozen=True, slots=True)
class Clause:
    text: str
    sentence: int  # which sentence of the text it is in
    subject: str  # self | thing | person | pronoun | none
    key: str | None  # for person: the noun or name, lower case
    question: bool
    modal: bool
    visit: bool
    retracts: bool
    change: bool
    # the words of a thing subject's phrase ("our gas stove" -> gas, stove): the question may
    # name any of them
    nouns: tuple[str, ...] = ()

    @property
    def states_change(self) -> bool:
        """Asserted (not a question, plan, wish or visit) and it changes or takes back something."""
        return not (self.question or self.modal or self.visit) and (self.change or self.retracts)

    @property
    def asserts(self) -> bool:
        return not (self.question or self.modal) and self.subject != "none"


_ARTICLES = frozenset({"the", "a", "an"})
_PREPOSITIONS = frozenset({"in", "on", "at", "since", "over", "during", "by", "for", "as", "of", "from"})
_TIME_NOUNS = frozenset("""day days week weeks month months year years weekend spring summer autumn fall winter
    morning evening night moment end start beginning other few couple""".split()) | _MONTHS
_NAME_VERB = re.compile(r"(?i)^(?:is|was|has|had|and|'s|’s|isn't|wasn't|didn't|doesn't|did|does|got|went|came"
                        r"|left|quit|died|sold|made|took|became|finally|just|now|\w+ed|\w+s)$")


_FIRST_PERIODS = frozenset("day days week weeks month months term semester year shift".split())


def _subject(words: list[str]) -> tuple[str, str | None, bool]:
    """(subject kind, key, implied) of a clause from its first words; implied: chat dropped the
    "I" ("Packed up and moved to Denver")."""
    i = 0
    while i < len(words):
        low = words[i].casefold()
        if _SELF.match(words[i]):
            break
        if low in _LEAD or (low == "that" and i and words[i - 1].casefold() == "now") or (  # "Now that we've ..."
                low in ("these", "those") and i + 1 < len(words) and words[i + 1].casefold() == "days"):
            i += 1
            continue
        # "in the spring", "a few weeks ago": an article inside a time phrase
        if low in _ARTICLES and ((i and words[i - 1].casefold() in _PREPOSITIONS)
                                 or (i + 1 < len(words) and words[i + 1].casefold() in _TIME_NOUNS)):
            i += 1
            continue
        break
    rest = words[i:]
    if not rest:
        return "none", None, False
    first = rest[0]
    low = first.casefold()
    at = 1 if low in ("my", "our") else 0
    if (len(rest) > at + 2 and rest[at].casefold() == "first" and rest[at + 1].casefold() in _FIRST_PERIODS
            and rest[at + 2].casefold() in ("at", "in", "as", "with", "of")):
        return "self", None, True  # "First week at Deloitte done!!": the speaker's first week there
    if _SELF.match(first):
        return "self", None, False
    if low in ("my", "our", "the", "his", "her", "their") and len(rest) > 1:
        noun_at = 1
        while noun_at < len(rest) - 1 and rest[noun_at].casefold() in ("new", "old", "little", "big", "younger",
                                                                         "older", "best", "current", "former",
                                                                         "own", "lab", "twin", "baby"):
            noun_at += 1
        if noun_at + 2 < len(rest) and rest[noun_at + 1].casefold() == "and" and _SELF.match(rest[noun_at + 2]):
            return "self", None, False  # "my wife and I moved to Leeds"
        noun = rest[noun_at].casefold().replace("’", "'")
        base = noun[:-2] if noun.endswith("'s") else noun
        if low == "our" and base in _GROUPS:
            return "self", None, False
        if base.endswith("s") and base[:-1] in PERSON_NOUNS:
            base = base[:-1]  # "the neighbours just got a puppy"
        if base in PERSON_NOUNS or base in PET_NOUNS or rest[noun_at - 1].casefold() == "lab":
            if noun.endswith("'s") and base not in PET_NOUNS:
                return "person", base, False  # "my colleague's team": theirs
            return ("person", base, False) if low in ("my", "our", "the") else ("pronoun", None, False)
        if low in ("his", "her", "their"):
            return "pronoun", None, False
        return "thing", base, False
    if low in ("there", "there's", "there’s", "here's", "here’s") and len(rest) > 1:
        # "There's a new puppy in the house now": what the speaker's world now holds
        at = 1
        while at < len(rest) - 1 and rest[at].casefold() in ("is", "are", "'s", "a", "an", "the", "some", "new",
                                                                "old", "little", "big", "brand"):
            at += 1
        noun = rest[at].casefold()
        if noun in PERSON_NOUNS or noun in PET_NOUNS:
            return "person", noun, False
        return "thing", noun, False
    if low in ("it", "it's", "it’s", "its", "that's", "that’s"):
        lows = [w.casefold() for w in rest]
        if any(a == "for" and b in ("me", "us") for a, b in zip(lows, lows[1:])):
            return "self", None, True  # "it's the 7:05 tram to work for me now": the speaker's state
        return "thing", None, False  # a thing: "Spotify is history, it's Apple Music now"
    if low in _PRONOUN:
        return "pronoun", None, False
    if low in _IMPERATIVE and len(rest) > 1 and not any(w.casefold() in ("her", "his", "their") or re.search(
            r"['’]s$", w) for w in rest[1:]):
        return "self", None, True  # "Send the invoice to sam@reyes.co"; not "send it to her new address"
    if low in ("no", "not", "living", "loving", "being", "having", "off", "back", "done", "finished", "down", "up"):
        return "self", None, True  # "No more coffee shop for me!", "Not using Windows anymore"
    if low in PERSON_NOUNS or low in PET_NOUNS:
        return "person", low, False  # "Baby number three arrived"
    if low in ("new", "old") and len(rest) > 1 and rest[1].casefold() not in _FUNCTION:
        return "thing", rest[1].casefold(), False  # "New number: 07700 900999"
    if first[:1].isupper() and (ident := _identified(rest)) is not None:
        return "thing", ident[0], False  # "Disney+ is the only streaming service we pay for", "Monzo's my bank"
    if first[:1].isupper() and re.search(r"['’]s$", first):
        return "person", re.sub(r"['’]s$", "", low), False  # "Ella's first term at Brookfield"
    if len(rest) > 2 and rest[1].casefold() == "and" and _SELF.match(rest[2]):
        return "self", None, False  # "Aisha and I are separating": the speaker is in it
    if first[:1].isupper() and not (low.endswith("ed") or low in _PAST_IRREGULAR or low.endswith("ing")):
        ended = [w.casefold() for w in rest[1:3]]
        if ended and (ended[0] in ("is", "are", "'s", "’s") and ended[1:2] and ended[1] in _ENDED
                      or re.search(r"(?i)['’]s$", first) and ended[0] in _ENDED):
            return "thing", re.sub(r"['’]s$", "", low), False  # "Spotify is history", "The Vespa's gone"
        if len(rest) > 1 and _NAME_VERB.match(rest[1]):
            return "person", low.replace("’", "'").removesuffix("'s"), False  # "Tom proposed", "Sarah and I"
        return "thing", low, False  # "First week at the new gig", "New contract signed"
    if (low in _PAST_IRREGULAR or (low.endswith("ed") and low not in _NOT_PAST)) and len(rest) > 1:
        return "self", None, True
    if low.endswith("ing") and len(low) > 4 and len(rest) > 1:
        return "self", None, True  # "Writing to you from my new flat in Bergen"
    return "none", None, False


_COPULA = frozenset("is was 's ’s".split())
_OWNER = frozenset("my our i we me us i'm we're i've we've".split())


def _identified(rest: list[str]) -> tuple[str, tuple[str, ...]] | None:
    """A name identified as one of the speaker's things by a copula ("Disney+ is the only
    streaming service we pay for", "Monzo is my bank now", "Halcyon Dental is where we go" has no
    noun and is not one): (the head noun, the noun phrase's words), or None. The complement names
    what the name is the value of; the speaker owns it (my, our, or I or we in the clause); a
    person's noun there ("Tom is my brother") leaves the name a person."""
    lows = [w.casefold().replace("’", "'") for w in rest]
    if len(lows) > 2 and lows[0].endswith("'s"):
        complement = lows[1:]  # "Monzo's my bank"
    elif len(lows) > 3 and lows[1] in _COPULA:
        complement = lows[2:]
    else:
        return None
    if complement[0] not in ("the", "a", "an", "my", "our") or not any(w in _OWNER for w in complement):
        return None
    phrase: list[str] = []
    for w in complement[1:]:
        if w in _FUNCTION or w in _OWNER or w in _LEAD:
            break
        phrase.append(w.removesuffix("'s"))
    if not phrase or any(w in PERSON_NOUNS or w in PET_NOUNS for w in phrase):
        return None
    return phrase[-1], tuple(phrase)


def _first_word(words: list[str]) -> int:
    """Where a clause's words begin after its lead words ("So Monzo is ..." -> 1)."""
    at = 0
    while at < len(words) and words[at].casefold() in _LEAD:
        at += 1
    return at


def _opens_phrase(words: list[str]) -> bool:
    """Does the clause open (after its lead words) with a determiner or "there's"?"""
    for w in words:
        low = w.casefold().replace("’", "'")
        if low in _LEAD:
            continue
        return low in ("my", "our", "the", "his", "her", "their", "there", "there's", "here's")
    return False


def _thing_words(words: list[str]) -> tuple[str, ...]:
    """The first content words of a clause about a thing: its noun phrase and a little after
    ("Our gas stove takes forever" -> gas, stove, takes)."""
    out = []
    for w in words:
        low = w.casefold().replace("’", "'").removesuffix("'s")
        if low in _LEAD or low in _FUNCTION or low in _SELF_WORDS:
            continue
        out.append(low)
        if len(out) == 3:
            break
    return tuple(out)


_SELF_WORDS = frozenset("i i'm i've we we're we've".split())


def names_thing(c: Clause, question: Asked) -> bool:
    """Does the question name the thing the clause is about ("how do we heat the house?" and
    "The oil boiler was ripped out" share nothing; "what kind of stove" and "our gas stove" do)?"""
    keys = ([c.key] if c.key else []) + list(c.nouns)
    return any(k in question.words or k.rstrip("s") in question.words for k in keys)


CACHED_TEXT_CHARS = 4000  # texts up to this are their own cache key (longer: _long_clauses)
LONG_TEXT_CHARS = 32_000  # texts up to this are cached under a digest of them, fewer at a time
LONG_ENTRIES = 256


def clauses(text: str) -> list[Clause]:
    """The clauses of a text, each with its subject and flags (see the module docstring)."""
    if len(text) <= CACHED_TEXT_CHARS:
        return list(_cached_clauses(text))
    return list(_long_clauses(text) if len(text) <= LONG_TEXT_CHARS else _clauses(text))


_LONG_CLAUSES: LRU[str | bytes, tuple[Clause, ...]] = LRU(LONG_ENTRIES)


def _long_clauses(text: str) -> tuple[Clause, ...]:
    """_clauses of a long text (LongMemEval's assistant turns run to thousands of characters and
    were parsed again at every recall that scored them), kept under a digest so the key does not
    hold the text; at most LONG_ENTRIES of them, least recently used first out."""
    key = text_key(text, CACHED_TEXT_CHARS)
    hit = _LONG_CLAUSES.get(key)
    if hit is None:
        hit = _clauses(text)
        _LONG_CLAUSES.put(key, hit)
    return hit


def _name_like(word: str) -> bool:
    """A word that can stand for a person in a subject: a name, a person noun, I or me."""
    low = word.casefold().replace("’", "'").removesuffix("'s")
    return (low in PERSON_NOUNS or low in ("i", "me", "we", "us") or low.rstrip("s") in PERSON_NOUNS
            or (word[:1].isupper() and low not in _LEAD and low not in _FUNCTION))


def _joins_subjects(before: str, after: str) -> bool:
    """Does an "and" join two people into one subject ("Aisha and I are separating", "well mum
    and dad did", "me and my boyfriend are skint") rather than two clauses? What precedes it in
    its clause is a person alone (after lead words; "my" or "our" before a person noun), and a
    person follows it."""
    words = _WORD.findall(before)
    while words and words[0].casefold() in _LEAD:
        words = words[1:]
    if words and words[0].casefold() in ("my", "our"):
        words = words[1:]
    nxt = _WORD.findall(after)[:2]
    if nxt and nxt[0].casefold() in ("my", "our") and len(nxt) > 1:
        nxt = nxt[1:]
    return len(words) == 1 and _name_like(words[0]) and bool(nxt) and _name_like(nxt[0])


# A correction of who did it, right after the clause it corrects: "we've started on metformin -
# well, Dev has", "so we finally moved!! well mum and dad did", "we picked up our new Range
# Rover!! well, my husband's". The corrected clause is theirs, not the speaker's.
_SUBJECT_CORRECTION = re.compile(
    r"(?i)^\W*(?:well|or\s+rather|i\s+mean|technically|strictly)\W+(?:(?:my|our)\s+)?"
    r"(?P<who>[\w'’]+)(?:\s+and\s+(?:my\s+|our\s+)?[\w'’]+)?"
    r"(?:\s+(?:did|has|have|had|does|do|is|are|was|were)|['’]s)\W*$")


def _only_lead(piece: str) -> bool:
    """A piece of nothing but lead words ("well", "or rather")."""
    words = _WORD.findall(piece)
    return bool(words) and all(w.casefold() in _LEAD or w.casefold() in ("rather", "or", "mean") for w in words)


def _corrected_subject(piece: str) -> str | None:
    """The person a piece hands the clause before it to ("well, Dev has" -> "dev"), or None."""
    m = _SUBJECT_CORRECTION.match(piece)
    if m is None or not _name_like(m.group("who")) or m.group("who").casefold() in ("i", "me", "we", "us"):
        return None
    who = m.group("who").casefold().replace("’", "'").removesuffix("'s")
    return who[:-1] if who.endswith("s") and who[:-1] in PERSON_NOUNS else who  # as _subject keys them


def _clauses(text: str) -> tuple[Clause, ...]:
    out: list[Clause] = []
    last_person: str | None = None
    # A sentence's question mark and modality reach its clauses: "if I change jobs I'll ...".
    for number, sentence in enumerate(re.split(r"(?<=[.!?])\s+|\n+", text)):
        sentence = sentence.strip()
        if not sentence:
            continue
        is_question = sentence.rstrip("\"'’”) ").endswith("?")
        sentence_modal = bool(re.match(r"(?i)^\W*(?:if|unless|when|once|whenever|in\s+case|suppose)\b", sentence))
        future = bool(_FUTURE_ING.search(sentence) or _FUTURE_PRESENT.search(sentence))
        pieces: list[str] = []
        at = 0
        for m in _CLAUSE_BREAK.finditer(sentence):
            if m.end() == m.start() and m.start() == at:
                continue  # a lookahead break at the start of a clause
            if m.group().casefold() == "and" and _joins_subjects(sentence[at:m.start()], sentence[m.end():]):
                continue  # "Aisha and I are giving it another go", "mum and dad did": one subject
            pieces.append(sentence[at:m.start()])
            at = m.end()
        pieces.append(sentence[at:])
        carry: tuple[str, str | None] = ("none", None)
        pieces = [p for p in pieces if _WORD.search(p)]
        for index, piece in enumerate(pieces):
            piece = piece.strip()
            words = _WORD.findall(piece)
            if not words:
                continue
            subject, key, implied = _subject(words)
            nouns: tuple[str, ...] = ()
            if subject == "thing":
                if key is None and out and out[-1].sentence == number and out[-1].subject == "thing":
                    key, nouns = out[-1].key, out[-1].nouns  # "Spotify is history, it's Apple Music now"
                elif key is None and out and out[-1].sentence == number and out[-1].subject == "person":
                    subject, key = "person", out[-1].key  # "my brother switched to Android, it's a Pixel now"
                elif _opens_phrase(words):
                    nouns = _thing_words(words)  # "our gas stove", "there's an induction hob"
                elif (ident := _identified(words[_first_word(words):])) is not None:
                    nouns = ident[1]  # "Disney+ is the only streaming service": streaming, service
                elif key is not None:
                    nouns = (key,)  # "Spotify is history", "New contract signed"
            who = _corrected_subject(piece) or (
                _corrected_subject(f"{pieces[index - 1]} {piece}") if index and _only_lead(pieces[index - 1]) else None)
            if who is not None:
                # the speaker's clause just before it was theirs: "we've started on metformin - well, Dev has"
                corrected = next((i for i in range(len(out) - 1, -1, -1) if out[i].sentence >= number - 1
                                  and out[i].subject == "self" and not _only_lead(out[i].text)), None)
                if corrected is not None:
                    out[corrected] = replace(out[corrected], subject="person", key=who)
                subject, key, implied = "person", who, False
            continued = subject == "none" and carry[0] != "none"
            if _only_lead(piece):
                pass  # "well", "ok": no clause of anyone's
            elif carry[0] != "none" and (subject == "none" or (implied and carry[0] == "person")):
                subject, key = carry  # "My husband left Google and [he] joined a startup"
                if subject == "thing" and out and out[-1].sentence == number:
                    nouns = out[-1].nouns
            elif subject == "pronoun" and last_person is not None:
                subject, key = "person", last_person  # "... and named it Mango, now they chat"
            if subject == "person" and re.search(r"(?i)\b\w+(?:ed|ched)\s+(?:me|us)\b", piece):
                subject, key = "self", None  # "my doctor switched me from sertraline to ..."
            if subject != "none":
                carry = subject, key
            if subject == "person":
                last_person = key
            clause_future = future and (subject != "self" or bool(_FUTURE_ING.search(piece)))
            # "thinking of quitting nursing and [thinking of] retraining": a continuation keeps the mood
            modal = sentence_modal or bool(MODAL.search(piece)) or clause_future or bool(HEDGE.search(piece)) or bool(
                _ARRANGED.search(piece)) or (
                (continued or implied) and bool(out) and out[-1].sentence == number and out[-1].modal)
            # "Went to a pottery taster, messy but fun": a continuation stays at the visit
            visit = bool(VISIT.search(piece) or temporary(piece)) or (continued and bool(out) and out[-1].sentence == number
                                                  and out[-1].visit)
            out.append(Clause(
                text=piece, sentence=number, subject=subject, key=key,
                # a question mark asks in the sentence's last clause, or in one that opens like a
                # question: "I've used my Fitbit for 6 months now - any tips for lazy Sundays?"
                question=is_question and (index == len(pieces) - 1 or bool(_QUESTION_OPEN.match(piece))),
                modal=modal,
                visit=visit, retracts=bool(RETRACTS.search(piece)),
                change=bool(CHANGE.search(piece)) and not ADDITIVE.search(piece),
                nouns=nouns if subject == "thing" else ()))
    return tuple(out)


# Recall asks for the clauses of the same best-scored turns question after question (a third of
# the current-truth stage's CPU before this cache); bounded in entries and, by CACHED_TEXT_CHARS,
# in the size of each. prime_clauses fills it (and _LONG_CLAUSES) from parses a store kept: a
# fresh process (a LongMemEval container answers one question) would parse its long turns again.
_CLAUSES: LRU[str | bytes, tuple[Clause, ...]] = LRU(8192)


def _cached_clauses(text: str) -> tuple[Clause, ...]:
    hit = _CLAUSES.get(text)
    if hit is None:
        hit = _clauses(text)
        _CLAUSES.put(text, hit)
    return hit


# The version of the clause rules: a stored parse made by other rules is never read. The rules
# are this file's (every regex and word list _clauses reads is defined here; of what it imports,
# memo only caches and timeutil.month_number serves ahead_of, a reading made at recall, never stored).
RULES_VERSION = hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


# The trust of the turns recall's current-truth stage compares (with a speaker): the ones whose
# parse ingestion keeps.
PARSED_TRUST = frozenset({"user", "external"})


def turn_body(text: str, speaker: str | None) -> str:
    """A turn's text without the "<speaker>: " prefix the chat importers put in front."""
    for label in (speaker, "user", "assistant"):
        if label and text.startswith(label + ":"):
            return text[len(label) + 1:].lstrip()
    return text


def text_digest(text: str) -> bytes:
    """The key a stored parse of `text` is kept under (16 bytes)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def parsed(text: str) -> bool:
    """Are the clauses of `text` in this process's caches already (no parse, no store read needed)?"""
    if len(text) <= CACHED_TEXT_CHARS:
        return _CLAUSES.get(text) is not None
    return len(text) <= LONG_TEXT_CHARS and _LONG_CLAUSES.get(text_key(text, CACHED_TEXT_CHARS)) is not None


def encode_clauses(parts: tuple[Clause, ...] | list[Clause]) -> str:
    """A parse as compact JSON (one array a clause), for the store."""
    return json.dumps([[c.text, c.sentence, c.subject, c.key, c.question, c.modal, c.visit, c.retracts, c.change,
                        list(c.nouns)] for c in parts], ensure_ascii=False, separators=(",", ":"))


def decode_clauses(text: str) -> tuple[Clause, ...]:
    return tuple(Clause(t, n, s, k, q, m, v, r, ch, tuple(nouns)) for t, n, s, k, q, m, v, r, ch, nouns in json.loads(text))


def prime_clauses(text: str, parts: tuple[Clause, ...]) -> None:
    """Serve `parts` as the clauses of `text` (a parse stored by these rules: RULES_VERSION)."""
    if len(text) <= CACHED_TEXT_CHARS:
        _CLAUSES.put(text, parts)
    elif len(text) <= LONG_TEXT_CHARS:
        _LONG_CLAUSES.put(text_key(text, CACHED_TEXT_CHARS), parts)


@dataclass(frozen=True, slots=True)
class Asked:
    """Whom a question asks about: the speaker themself, and/or other people or pets by key;
    and its words, so that a clause about a thing ("my new phone is ...") counts only when the
    question names that thing."""

    self_: bool
    people: frozenset[str]
    words: frozenset[str] = frozenset()
    # the speaker alone, not their household: "do I have any dietary restrictions myself?"
    alone: bool = False


_Q_POSSESSIVE = re.compile(r"(?i)\b(?:my|our)\s+(?:(?:new|old|little|younger|older|best)\s+)?([\w'’-]+)")
_Q_NAME = re.compile(r"(?<!^)(?<![.!?]\s)\b([A-Z][a-zà-ÿ]+)\b")
_CALENDAR = _MONTHS | frozenset("""monday tuesday wednesday thursday friday saturday sunday mondays tuesdays
    wednesdays thursdays fridays saturdays sundays christmas easter""".split())
_Q_SELF = re.compile(r"(?i)\b(?:i|me|my|mine|myself|we|us|our|ours|i'm|i've|i’m|i’ve)\b")


_ALONE = re.compile(r"(?i)\b(?:myself|personally|(?:just|only)\s+me|on\s+my\s+own)\b")
_PLURAL_SELF = frozenset("we we're we've we'd we'll us".split())


def _household(c: Clause, question: Asked) -> bool:
    """A clause of the speaker's household ("we've gone dairy free at home") for a question about
    the speaker alone ("... myself?"): not theirs alone to state or change."""
    if not (question.alone and c.subject == "self"):
        return False
    first = next((w.casefold().replace("’", "'") for w in _WORD.findall(c.text) if _SELF.match(w)), None)
    return first in _PLURAL_SELF


def asked(question: str) -> Asked:
    people: set[str] = set()
    for m in _Q_POSSESSIVE.finditer(question):
        noun = m.group(1).casefold().replace("’", "'").removesuffix("'s")
        if noun in PERSON_NOUNS or noun in PET_NOUNS:
            people.add(noun)
    for m in _Q_NAME.finditer(question):
        if m.group(1).casefold() not in _CALENDAR:  # "what do I play on Tuesdays?" names no one
            people.add(m.group(1).casefold())
    own = bool(_Q_SELF.search(question))
    # "my son's school" asks about the son, not the speaker; "my phone" about the speaker
    self_ = own and not (people and all(p in PERSON_NOUNS or p in PET_NOUNS for p in people)
                         and not re.search(r"(?i)\b(?:i|me|we|us)\b", question))
    words = {w.casefold().replace("’", "'").removesuffix("'s") for w in _WORD.findall(question)}
    words |= {w[:-1] for w in words if w.endswith("s")}
    return Asked(self_=self_ or not people, people=frozenset(people), words=frozenset(words),
                 alone=bool(_ALONE.search(question)))


def widened(question: Asked, text: str) -> Asked:
    """The question as it reads beside an earlier statement: the things that statement names
    count as named ("The oil boiler was ripped out" changes "we heat the house with an old oil
    boiler", though the question "how do we heat the house?" never says boiler)."""
    extra = {w.casefold().replace("’", "'").removesuffix("'s") for w in _WORD.findall(text)}
    extra = {w for w in extra if len(w) > 2 and w not in _FUNCTION and w not in _LEAD and not w.isdigit()}
    return Asked(self_=question.self_, people=question.people, words=question.words | frozenset(extra),
                 alone=question.alone)


def leads_for(text: str, question: Asked, *, speaker_named: str | None = None) -> str | None:
    """The first clause of `text` that states a change for whom the question asks about, or None
    (all of them: changes_for)."""
    found = changes_for(text, question, speaker_named=speaker_named)
    return found[0] if found else None


def changes_for(text: str, question: Asked, *, speaker_named: str | None = None) -> list[str]:
    """The clauses of `text` that state a change for whom the question asks about.

    For a question about the speaker, only the speaker's own clauses (and their things) count:
    "my sister just moved to Paris" changes nothing about where I live. For a question about
    someone else, the speaker's clauses count too ("we moved Noah to Hillside"), and so do
    clauses about that person; clauses about a third person never do."""
    asks_speaker = question.self_ or (speaker_named is not None and speaker_named.casefold() in question.people)
    if (not asks_speaker and speaker_named is not None and question.people
            and not question.people & (PERSON_NOUNS | PET_NOUNS)):
        return []  # Caroline's turn says nothing of Melanie's changes
    parts = clauses(text)
    # sentences where the speaker states a change: "New contract signed: my salary is 65k"
    changed = {c.sentence for c in parts if c.states_change and c.subject in ("self", "thing")}
    ended = set()  # sentences where a thing changed before the clause: "the old Samsung died, so I got a Pixel"
    out: list[str] = []
    for c in parts:
        if _household(c, question):
            continue
        asked_thing = c.subject == "thing" and names_thing(c, question)
        if asked_thing and c.asserts and not c.visit and (c.states_change or c.sentence in changed):
            out.append(c.text)  # "my new phone is an iPhone 15" for "what phone do I have?"
        elif c.subject == "self" and c.asserts and not c.visit and c.sentence in ended and asks_speaker:
            out.append(c.text)  # what the speaker did about it is their change
            ended.discard(c.sentence)
        elif not c.states_change:
            continue
        elif c.subject == "self" or (c.subject == "person" and c.key in DEPENDANTS and asks_speaker):
            out.append(c.text)
        elif c.subject in ("thing", "person", "pronoun") and asks_speaker and _DONE_TO_SPEAKER.search(c.text):
            out.append(c.text)  # "the neurologist put me on sumatriptan", "they made me head of sales"
        elif (c.subject == "person" and c.key in _PROVIDERS and asks_speaker
              and _acts_on_asked_thing(c.text, question)):
            out.append(c.text)  # "the landlord put the rent up to 1,320": they changed the speaker's thing
        elif c.subject == "person" and not asks_speaker and _own(c, question, asks_speaker):
            out.append(c.text)
        if c.subject == "thing" and c.states_change and not c.retracts:
            ended.add(c.sentence)
    return out


def stance_for(text: str, question: Asked, *, speaker_named: str | None = None,
               plans_aside: bool = False) -> tuple[str, Any]:
    """How a turn stands towards what the question asks: ("change", [clauses]) when it states a
    change for whom the question asks about (changes_for); ("state", clause) when it asserts their
    present state; ("aside", clause) when it speaks of the same thing only as a plan, wish,
    hypothetical, visit or someone else's matter; ("none", None) otherwise (questions, small talk).
    `plans_aside` (feature framed_plans): a turn whose every asserted clause is framed as a plan or
    a step ("the idea is to go by next spring", "been looking at flats in Margate") is an aside."""
    found = changes_for(text, question, speaker_named=speaker_named)
    if found:
        return "change", found
    own = claims_for(text, question, speaker_named=speaker_named)
    if own and plans_aside and all(_FRAME.search(c) or _STEP.search(c) for c in own):
        return "aside", own[0]
    if own:
        return "state", own[0]
    for c in clauses(text):
        if not c.question and (c.modal or c.visit or c.subject == "person"):
            return "aside", c.text  # a plan, wish, visit, or someone else's matter
    return "none", None


def _acts_on_asked_thing(text: str, question: Asked) -> bool:
    """Does the clause act on the speaker's own thing that the question names ("the landlord
    put the rent up" for "how much rent do we pay?"; not "my sister got a new phone")?"""
    for m in re.finditer(r"(?i)\b(?:my|our|the)\s+(?=([\w'’-]+)(?:\s+([\w'’-]+))?)", text):
        for w in m.groups():
            low = (w or "").casefold()
            if low and low not in _FUNCTION and (low in question.words or low.rstrip("s") in question.words):
                return True
    return False


_OWN_LATER = re.compile(r"(?i)^\W*\S+\b.*\b(?:my|our|me|us|mine)\b")
# A place or a circumstance: the speaker as the object of a preposition ("she keeps digging under
# our fence", "he parks outside our house") ties nothing of theirs to the speaker.
_PLACE_PREPOSITIONS = frozenset("""under over behind beside near by outside inside into onto through past across
    around along against towards toward at in on from off next""".split())
_SPEAKER_WORD = re.compile(r"(?i)\b(my|our|me|us|mine)\b")


def _ties_to_speaker(text: str) -> bool:
    """Does a clause about someone or something tie them to the speaker ("Spotify is my go-to",
    "you can reach me on 07700 900123"), the speaker named other than as a place or circumstance
    ("digging under our fence")?"""
    if not _OWN_LATER.match(text):
        return False
    for m in _SPEAKER_WORD.finditer(text):
        before = _WORD.findall(text[:m.start()])
        if not before or before[-1].casefold() not in _PLACE_PREPOSITIONS:
            return True
    return False


def _own(c: Clause, question: Asked, asks_speaker: bool, *, relation: bool = False) -> bool:
    """Is the clause about whom (or the thing) the question asks about? With `relation`, a clause
    that ties someone or something to the speaker counts too ("Spotify is my go-to", "you can
    reach me on 07700 900123"): a statement of the speaker's state, though never their change."""
    if c.subject == "self":
        return not _household(c, question)
    if relation and asks_speaker and c.subject in ("person", "thing", "pronoun") and _ties_to_speaker(c.text):
        return True
    if c.subject == "thing":
        return names_thing(c, question)
    if c.subject == "person":
        named = {w.casefold() for w in re.findall(r"\b[A-Z][a-zà-ÿ]+\b", c.text)}
        # "the kids renamed the dog" changes the dog too ("my neighbour walked our dog" is theirs)
        acted_on = c.states_change and any(
            re.search(rf"(?i)\b(?:my|our|the)\s+(?:[\w'’-]+\s+)?{re.escape(p)}\b", c.text) for p in question.people)
        return (c.key in question.people or bool(named & question.people) or acted_on
                or (asks_speaker and c.key in DEPENDANTS))
    return False


def claims_for(text: str, question: Asked, *, speaker_named: str | None = None) -> list[str]:
    """The clauses of a text that assert the present state of whom the question asks about."""
    asks_speaker = question.self_ or (speaker_named is not None and speaker_named.casefold() in question.people)
    return [c.text for c in clauses(text) if c.asserts and not c.visit
            and _own(c, question, asks_speaker, relation=True)]


_REPORTED = re.compile(r"(?i)\b(?:say|said|mention(?:ed)?|told|tell|talk(?:ed)?\s+about|thinking|considering|consider"
                       r"|plan(?:ned|ning)?|hop(?:e|ed|ing)|want(?:ed)?|wish(?:ed)?|almost|nearly)\b")


def asks_about_asides(question: str) -> bool:
    """Does the question itself ask about a plan, wish, visit or what was said ("which car did I
    say I'd get someday?", "what did we rent for the trip?"), so that asides are its answer?"""
    return bool(MODAL.search(question) or VISIT.search(question) or _REPORTED.search(question))


_NOW = re.compile(r"(?i)\b(?:now|currently|current|these\s+days|nowadays|still|anymore|any\s+more|at\s+the\s+moment"
                  r"|right\s+now|most\s+recent(?:ly)?|latest|at\s+present|today)\b")
_PAST = re.compile(r"(?i)\b(?:did|was|were|when|had|ago|last|first|before|after|during|used\s+to|yesterday"
                   r"|in\s+(?:19|20)\d\d)\b")
_PRESENT = re.compile(r"(?i)\b(?:is|are|am|do|does|have|has|should|'s|’s|'re|’re|'m|’m)\b")


def asks_state(question: str) -> bool:
    """Does the question ask how things stand now ("where do I live?", "what car am I driving
    now?"), rather than what happened ("what did Joanna submit?", "when did she move?")?"""
    return bool(_NOW.search(question)) or (bool(_PRESENT.search(question)) and not _PAST.search(question))


# Not yet a state: a time still ahead ("next month", "tomorrow", "in two weeks", "from Monday",
# "starting in May") or a step towards a change that is not the change ("applied for", "an
# interview", "a viewing", "booked", "waiting to hear", "an offer on").
NOT_YET = re.compile(
    rf"(?i)\b(?:next\s+(?:week|weekend|month|year|term|semester|spring|summer|autumn|fall|winter|{_DAY}\w*)"
    r"|tomorrow|tonight|soon|(?:in|within)\s+(?:a|an|one|two|three|four|five|six|a\s+few|a\s+couple\s+of|\d+)\s+"
    r"(?:days?|weeks?|months?|years?)|from\s+(?:next|tomorrow|the\s+\d+\w*|\d+\w*\s+\w+"
    rf"|{_DAY}\w*)|starting\s+(?:next|on|in|from|tomorrow)|by\s+the\s+end\s+of|later\s+this"
    r"|appl(?:y|ied|ying)\s+(?:for|to)|interview(?:s|ed|ing)?\b|viewings?|shortlisted|booked|waiting\s+to\s+hear"
    r"|pending|(?:an|the|our|my)\s+offer\s+(?:on|for|in)|offer\s+in\s+on"
    r"|looking\s+(?:at|for|into|around)|(?:house|flat|job)[-\s]?hunting|the\s+plan\s+is|aiming\s+(?:to|for))\b")
# A moment a statement is anchored to ("last week", "on Friday", "tomorrow", "two days ago", "in
# June"): an episode, not a standing state. States are said without one ("I live in Munich", "my
# car is a Polestar"), or with the time they began ("since the spring"), or with a habit ("on
# Tuesdays", "every morning").
ANCHORED = re.compile(
    rf"(?i)\b(?:yesterday|today|tonight|tomorrow|this\s+(?:morning|afternoon|evening)"
    r"|(?:last|this|next|past)\s+(?:week|weekend|month|year|night|term|semester|spring|summer|autumn|fall|winter"
    # "on Sunday", not "on Sunday mornings" (a habit, like "on Sundays")
    rf"|{_DAY}\w*)|(?:on|this|last|next)\s+{_DAY}\b(?!\s+(?:mornings|afternoons|evenings|nights))"
    r"|\d+\s+(?:days?|weeks?|months?|years?)\s+ago"
    r"|(?:a|an|one|two|three|four|five|six|a\s+few|a\s+couple\s+of)\s+(?:days?|weeks?|months?|years?)\s+ago"
    r"|(?:in|on|at|by|from|until)\s+(?:early\s+|late\s+|mid-?)?(?:january|february|march|april|june|july|august"
    r"|september|october|november|december))\b")
# Being somewhere is not living there: "I'm in Lisbon", "here in Leeds" (not "I live in", "we moved to").
_PRESENCE = re.compile(r"(?i)\b(?:i['’]m|i\s+am|im|we['’]re|we\s+are|here)\s+(?:\w+\s+)?in\s+(?-i:[A-Z])")
_RESIDENCE = re.compile(r"(?i)\b(?:live|lives|living|lived|home|moved|move|settled|based|rent|renting|bought|own|"
                        r"address|flat|house|apartment)\b")
# someone else's thing in the speaker's hands: "driving my brother's Tesla", "on my dad's old iMac"
_OTHERS_THING = re.compile(r"(?i)\b(?:my|our)\s+([\w-]+)['’]s?\s")


def one_slip_apart(a: str, b: str) -> bool:
    """One typing slip apart ("phne" and "phone", "camra" and "camera"), for words of four letters or more."""
    if a == b:
        return True
    if min(len(a), len(b)) < 4 or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        return sum(x != y for x, y in zip(a, b)) == 1
    short, long_ = sorted((a, b), key=len)
    return any(long_[:i] + long_[i + 1:] == short for i in range(len(long_)))


def names_thing_loosely(c: Clause, question: Asked) -> bool:
    """names_thing, forgiving one typing slip: "my phne is a pixel" is about "what phone do I have?"."""
    keys = ([c.key] if c.key else []) + list(c.nouns)
    return names_thing(c, question) or any(one_slip_apart(k, w) for k in keys for w in question.words)


# The plain present-tense assertion same_slot may order by time ("I bank with Monzo", "my GP is
# Dr Okoro", "Milo eats raw food"): each way a clause can fail to be one, read from its form, not
# from its topic. Where the form is unsure, it is not one.
# a frame that governs the value: an intention, a wish, a try ("hoping to land something at Pixel
# Forge", "keen to take up bouldering", "what I really want is a Defender", "the plan is to trade it")
_FRAME = re.compile(
    r"(?i)\b(?:hop(?:e|es|ed|ing)|plan(?:s|ned|ning)?|aim(?:s|ed|ing)?|intend(?:s|ed|ing)?|keen|tempted|eager"
    r"|dream(?:s|ing)?|want(?:s|ed)?|wish(?:es|ed)?|(?:love|like|prefer)\s+to|the\s+idea\s+is|is\s+the\s+idea"
    r"|sav(?:e|es|ed|ing)\s+(?:up\s+)?(?:for|to)|tr(?:y|ies|ying)\s+to|looking\s+(?:at|for|into|to|around)"
    r"|thinking|considering|about\s+to|ready\s+to|tempting|fancy|fancies|daydream|someday|one\s+day"
    # a time or a condition it waits on: "due to move", "set to start", "once the visa comes through"
    r"|due\s+to|set\s+to|scheduled|expect(?:s|ed|ing)?\s+to|meant\s+to|imagine|imagining|assuming|in\s+theory"
    r"|as\s+soon\s+as|once\s+(?:the|my|our|i|we|it|he|she|they|that|this)\b)\b")
# not a value that holds: "I'd never buy a Tesla", "I'm not switching", "no way I'm moving"
_NEGATION = re.compile(r"(?i)\b(?:not|never|no\s+way|nor|neither)\b|n['’]t\b")
# a step towards a state, not the state: "I've applied to Utrecht", "the offer from Siemens", "put
# Tom down for St Albans", "an interview at Deloitte", "on the waiting list"
_STEP = re.compile(
    r"(?i)\b(?:appl(?:y|ies|ied|ying|ication)|offer(?:s|ed)?|interview\w*|shortlist\w*|put\s+(?:\w+\s+){0,2}down\s+for"
    r"|waiting\s+list|wait-?list\w*|pending|viewings?|bid(?:s|ding)?|enquir\w+|inquir\w+)\b")
# told of a time before the present: "back in uni", "as a teenager", "when I was a kid", "I grew up in"
_PAST_FRAME = re.compile(
    r"(?i)\b(?:was|were|had|did|used\s+to|grew\s+up|back\s+(?:in|when|at|then)|as\s+an?\s+(?:kid|child|teenager"
    r"|teen|student|boy|girl)|when\s+(?:i|we)\s+(?:was|were)|in\s+my\s+(?:teens|twenties|youth)|years\s+ago"
    r"|growing\s+up|(?:at|in)\s+(?:uni|university|college|school)\s+i)\b")
_PAST_FORMS = _PAST_IRREGULAR | frozenset("""drank ate swam wore knew thought taught spoke sang slept stood sat saw
    felt heard held told said lived worked owned studied""".split())
_PRESENT_AUX = frozenset("""am is are 'm ’m 's ’s 're ’re have has 've ’ve do does""".split())
_CONTRACTED = ("'m", "'re", "'ve", "'s")  # "I'm", "it's" (’ already folded to ')
_SKIP_ADVERBS = frozenset("""still also just really mostly usually always only all both even currently basically
    honestly fully pretty""".split())
# a time named with a statement: "in August", "next spring", "for the next three weeks", "from
# Monday", "in 2025", "on the 14th"
_NAMED_TIME = re.compile(
    rf"(?i)\b(?:(?P<rel>(?:next|coming|upcoming)\s+(?:(?:few|couple\s+of|\w+)\s+)?(?:days?|weeks?|weekend|fortnight|months?"
    rf"|years?|term|semester|season|spring|summer|autumn|fall|winter|time|{_DAY}|january|february|march|april|may"
    r"|june|july|august|september|october|november|december)|tomorrow|soon|later\s+this|for\s+the\s+next"
    r"|(?:in|within)\s+(?:a|an|one|two|three|four|five|six|a\s+few|a\s+couple\s+of|\d+)\s+(?:days?|weeks?|months?|years?)"
    # "on Sunday" (not "on Sunday mornings", "on Tuesdays": a habit)
    rf"|(?:from|starting|on|this|by)\s+{_DAY}(?!s\b)\b(?!\s+(?:mornings|afternoons|evenings|nights)))"
    r"|(?P<since>(?:since|as\s+of)\s+(?:(?:the|last|early|late|mid)\s+)?[\w-]+(?:\s+(?:19|20)\d\d)?)"
    r"|(?P<month>january|february|march|april|may|june|july|august|september|october|november|december"
    r"|jan|feb|mar|apr|jun|jul|aug|sept?|oct|nov|dec)(?:\s+(?P<my>(?:19|20)\d\d))?"
    r"|(?P<season>spring|summer|autumn|fall|winter)|(?P<year>(?:19|20)\d\d)"
    # a day of a month with no month: "on the 14th", "from the 1st"
    r"|(?P<day>(?:on|from|by|until|till)\s+the\s+\d{1,2}(?:st|nd|rd|th)))\b")


def ahead_of(text: str, said_on: str | None) -> str | None:
    """Why `text` names a time after the day it was said (`said_on`, ISO), or may (a month or
    season without a year, a year not before it), or None. "in August" said in May is ahead;
    "since March", "two years ago" are not; "in 2019" said in 2024 is not."""
    day = said_on[:10] if said_on else "the day it was said"
    year = int(said_on[:4]) if said_on and said_on[:4].isdigit() else None
    month = int(said_on[5:7]) if said_on and said_on[5:7].isdigit() else None
    for m in _NAMED_TIME.finditer(text):
        if m.group("since"):
            continue
        if m.group("rel"):
            return f"'{m.group(0)}' is still ahead"
        if m.group("month"):
            if m.group(0).casefold() == "may" and not re.search(r"(?-i:May)\b", m.group(0)):
                continue  # the verb "may" (MODAL reads it)
            if m.group("my") and year is not None and int(m.group("my")) < year:
                continue
            at = month_number(m.group("month")) or 0
            if year is None or month is None:
                return f"'{m.group(0)}' without the day it was said"
            return (f"'{m.group(0)}' is after {day}" if at > month or m.group("my")
                    else f"'{m.group(0)}' may be ahead of {day} (next year's)")
        if m.group("season"):
            return f"'{m.group(0)}' may be ahead of {day}"
        if m.group("day"):
            return f"'{m.group(0)}' may be ahead of {day}"
        if m.group("year") and (year is None or int(m.group("year")) >= year):
            return f"'{m.group(0)}' is not before {day}"
    return None


def _tense(c: Clause) -> str:
    """"past" when the clause tells of the past (a past frame, or the first word after its
    subject is a past form: "I drank", "we lived"), "" when no word follows its subject, else
    "present"."""
    if _PAST_FRAME.search(c.text):
        return "past"
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(c.text)]
    for w in words:
        if w in _PRESENT_AUX or w.endswith(_CONTRACTED):  # a word of _WORD holds no line end
            return "present"  # "I'm", "it's", "has", "do"
        if _SELF.match(w) or w in _FUNCTION or w in _LEAD or w in _SKIP_ADVERBS:
            continue
        return "past" if past_form(w) else "present"
    return ""


def past_form(word: str) -> bool:
    """Is a casefolded word a verb's past form ("drank", "moved"; not "need", "speed")?"""
    return word in _PAST_FORMS or (word.endswith("ed") and word not in _NOT_PAST)


def told_done(text: str) -> bool:
    """Does a part of a clause tell of something done: a past form among its words ("Mia started at
    Durham in October", "they made me head of sales in January"), whoever its subject?"""
    return any(past_form(w.casefold().replace("’", "'")) for w in re.findall(r"[\w'’-]+", text))


# Reasons slot_claims gives that recall reads back (engine/retrieve/pipeline.py): named here, so
# a reworded reason cannot silently switch a rule off there.
TOLD_OF_PAST = "told of the past"
PLAN_FRAME = "a plan, wish or intention governs it"
NO_VERB = "no verb of its own: unsure"
UNSURE = "not a plain present-tense assertion: "  # + the first unsure clause's not_plain reason
NO_CLAIM = "no clause of theirs asserts it"
SOMEONE_ELSES = "someone else's turn"
WHERE_THEY_ARE = "where they are, not where they live"
STAY_THAT_ENDS = "a stay or stand-in that ends"  # + " (what ends it)"


def not_plain(c: Clause, said_on: str | None = None, *, reply: bool = False) -> str | None:
    """Why a clause is not a plain present-tense assertion of a value (a question, a plan, wish or
    intention frame, a negation, a step not yet a state, a time after the day it was said, told of
    the past, no verb of its own outside a reply), or None: what same_slot may order by time."""
    if c.question:
        return "a question"
    if c.modal or _FRAME.search(c.text) or HEDGE.search(c.text):
        return PLAN_FRAME  # before the open of a question: "What I want is ..."
    return _not_plain_unframed(c, said_on, reply)


def holds_back(why: str) -> bool:
    """Whether slot_claims' reason for reading no claim of a turn says it speaks of the asked thing
    as not holding now (a hope, a time ahead, a plan frame, a stay that ends, a take-back, an
    addition, a moment, someone else's turn), not merely that no clause of it reads as a plain
    claim (recall's later_leads)."""
    if not why or why == NO_CLAIM:
        return False
    if why.startswith(UNSURE):
        return why == UNSURE + PLAN_FRAME
    return True


def theirs(c: Clause, question: Asked) -> bool:
    """Is the clause about someone other than whom the question asks, or about their thing ("my
    sister moved to Paris", "the neighbours' dog is a spaniel too")?"""
    return ((c.subject == "person" and c.key not in question.people)
            or (c.subject == "thing" and _THEIR_THING.match(c.text) is not None))


def _not_plain_unframed(c: Clause, said_on: str | None, reply: bool) -> str | None:
    """not_plain of a clause already known to be no question and to have no modal, frame or hedge."""
    if _QUESTION_OPEN.match(c.text.strip()):
        return "a question"  # chat drops the question mark: "should I take the Deloitte job"
    if _NEGATION.search(c.text):
        return "negated"
    if _STEP.search(c.text):
        return "a step towards a state (an application, an offer), not the state"
    if (ahead := ahead_of(c.text, said_on)) is not None:
        return f"names a time after the day it was said ({ahead})"
    tense = _tense(c)
    if tense == "past":
        return TOLD_OF_PAST
    if tense == "" and not reply and c.subject not in ("thing",):
        return NO_VERB
    return None


_BACK_REFERENCE = frozenset("it it's its that that's this which who they they're he he's she she's".split())
_FINITE = re.compile(r"(?i)\b(?:is|are|am|was|were|has|have|had|does|do|did)\b|['’](?:s|re|m|ve)\b")


def _subordinate_stay(parts: list[Clause], at: int) -> bool:
    """Is the stay or stand-in of clause `at` a frame of that clause only: a clause with a verb of
    its own, after an asserted clause of its sentence that is no stay ("I eat fish again,
    pescatarian is easier when travelling for work": the travelling qualifies the ease, not the
    diet)? A bare bound ("I use a Chromebook, just for now") or an opening stay ("Housesitting in
    Bristol for a fortnight, the cat is lovely") frames the whole sentence, and so does one that points back at
    what was said ("I've got a Kia now, it's a hire car while mine is fixed")."""
    c = parts[at]
    words = [w.casefold().replace("’", "'") for w in _WORD.findall(c.text)]
    if not words or words[0] in _BACK_REFERENCE:
        return False  # "I've got a Kia now, it's a hire car while mine is fixed": the Kia is the stand-in
    return bool(_FINITE.search(c.text)) and any(
        p.sentence == c.sentence and p.asserts and not p.visit for p in parts[:at])


# slot_claims' reasons for a turn that speaks of a state only as something not yet so (a hope, a
# step, a time still ahead): pipeline's unasserted_below reads them. Not the plan frame of a
# clause: "plan" may be a noun ("my mobile plan is with Three"), and an unsure reading orders nothing
NOT_ASSERTED = ("a hope, not yet a fact", "points to a time still ahead, or to a step not yet taken",
                "a step towards a state (an application, an offer), not the state")


def _named_as(c: Clause) -> str | None:
    """The name a person subject is given beside its noun ("our son Max", "my wife Priya"), lower
    case, or None."""
    words: list[str] = _WORD.findall(c.text)
    lows = [w.casefold() for w in words]
    if c.key is None or c.key not in lows:
        return None
    at = lows.index(c.key) + 1
    if at < len(words) and words[at][:1].isupper() and lows[at] not in _FUNCTION:
        return lows[at].replace("’", "'").removesuffix("'s")
    return None


def slot_claims(text: str, question: Asked, *, reply: bool = False, speaker_named: str | None = None,
                said_on: str | None = None, per_sentence: bool = True) -> tuple[list[str], str]:
    """The clauses of a turn that assert a value of what the question asks about, held by whom it
    asks about, whatever their verb; or ([], why none can). The recall orders two such statements
    by time when nothing else links them (engine/retrieve/pipeline.py, feature same_slot), so this
    reads only what may replace: the speaker's own asserted state (or their thing's, their
    dependant's, the asked person's), not a question, plan, wish or hedge, not a stay that ends
    (temporary: a stated end, a short stay, a return, someone else's place, travel), not a turn
    that takes something back or adds to what holds ("also", "as well"), not someone else's thing,
    and not a turn anchored to a moment ("last week", "on Friday": an episode; a standing state is
    said without one).
    Each clause must also be a plain present-tense assertion (not_plain: no question, no plan,
    wish or intention frame, no negation, no step towards a state, no time after `said_on`, the
    day it was said, not told of the past).
    `reply`: the turn answers the other speaker's question ("Where are you working?" -> "Lloyds
    Pharmacy in Harrogate"), so a clause without a subject of its own is the speaker's.
    `per_sentence` (feature claims_in_passing): a moment anchors its own sentence only, not the
    turn; a person named beside their noun is that person ("our son Max"); and the speaker's own
    clause that names the asked person states that person's thing ("we're home-educating Max")."""
    asks_speaker = question.self_ or (speaker_named is not None and speaker_named.casefold() in question.people)
    if (not asks_speaker and speaker_named is not None and question.people
            and not question.people & (PERSON_NOUNS | PET_NOUNS)):
        return [], SOMEONE_ELSES
    reading = _slot_reading(text, said_on, reply, per_sentence)
    if isinstance(reading, str):
        return [], reading
    kept, unsure = reading
    out: list[str] = []
    for c, theirs in kept:
        if any(t in PERSON_NOUNS and t not in question.people for t in theirs):
            continue  # "my wife's car is a Volvo"
        if c.subject == "self" and asks_speaker:
            out.append(c.text)
        elif c.subject == "thing" and (names_thing_loosely(c, question) or (reply and asks_speaker)):
            out.append(c.text)
        elif c.subject == "person" and (c.key in question.people or (asks_speaker and c.key in DEPENDANTS)
                                        or (per_sentence and _named_as(c) in question.people)):
            out.append(c.text)  # per_sentence: "our son Max is in Y1 at St Anne's" for "where does Max go?"
        elif c.subject == "none" and reply and asks_speaker:
            out.append(c.text)
        elif (per_sentence and c.subject == "self" and not asks_speaker and question.people
              and question.people & {w.casefold() for w in _WORD.findall(c.text)[1:]}):
            out.append(c.text)  # the speaker's act on the asked person: "we're home-educating Max now"
    if out:
        return out, ""
    return [], f"{UNSURE}{unsure[0]}" if unsure else NO_CLAIM


_SlotReading = str | tuple[tuple[tuple[Clause, tuple[str, ...]], ...], tuple[str, ...]]
# slot_claims' reading of a turn that does not depend on the question, by (text, said_on, reply,
# per_sentence): recall after recall scores the same turns, and their regexes and not_plain were
# most of same_slot's CPU (issue 21). Long texts are kept under a digest of them.
_SLOT_READINGS: LRU[tuple[str | bytes, str | None, bool, bool], _SlotReading] = LRU(8192)


def _slot_reading(text: str, said_on: str | None, reply: bool, per_sentence: bool) -> _SlotReading:
    """Why no clause of the text can be a claim whatever the question (a reason), or its clauses
    that may be (each with the person nouns of someone else's thing it names) and the reasons of
    those only unsure (not_plain), in order."""
    key = (text_key(text, CACHED_TEXT_CHARS), said_on, reply, per_sentence)
    hit = _SLOT_READINGS.get(key)
    if hit is None:
        hit = _read_slots(text, said_on, reply, per_sentence)
        _SLOT_READINGS.put(key, hit)
    return hit


# Where a store keeps them (memory_clauses.readings, issue 21), the readings of a turn by variant:
# a fresh process (every benchmark run's) read each pooled turn again at its first recall, about a
# third of same_slot's CPU in LoCoMo dev's slowest recalls (tests.perf.recall_split).
def reading_variant(said_on: str | None, reply: bool, per_sentence: bool) -> str:
    """The key a stored reading is kept under, beside its turn: what, besides the text, it read."""
    return f"{int(reply)}{int(per_sentence)}{said_on or ''}"


def slot_readings(text: str, said_on: str | None) -> dict[str, Any]:
    """This process's readings of `text` said on `said_on` (every reply / per_sentence variant it
    has made), encoded by variant for the store: a reason, or [[clause index, the person nouns],
    ...] with the unsure reasons. Indices are into clauses(text)."""
    out: dict[str, Any] = {}
    parts: dict[Clause, int] | None = None  # a clause -> its index (the first of equal ones)
    for reply in (False, True):
        for per_sentence in (False, True):
            hit = _SLOT_READINGS.get((text_key(text, CACHED_TEXT_CHARS), said_on, reply, per_sentence))
            if hit is None:
                continue
            if isinstance(hit, str):
                out[reading_variant(said_on, reply, per_sentence)] = hit
                continue
            if parts is None:
                parts = {}
                for at, c in enumerate(clauses(text)):
                    parts.setdefault(c, at)
            kept, unsure = hit
            out[reading_variant(said_on, reply, per_sentence)] = [[[parts[c], list(theirs)] for c, theirs in kept],
                                                                  list(unsure)]
    return out


def prime_slot_readings(text: str, said_on: str | None, stored: dict[str, Any]) -> None:
    """Serve the readings a store kept of `text` (slot_readings' form, made by these rules:
    RULES_VERSION) as this process's own; the text's clauses must be served already."""
    parts: list[Clause] | None = None
    for reply in (False, True):
        for per_sentence in (False, True):
            encoded = stored.get(reading_variant(said_on, reply, per_sentence))
            if encoded is None:
                continue
            if isinstance(encoded, str):
                reading: _SlotReading = encoded
            else:
                if parts is None:
                    parts = clauses(text)
                kept, unsure = encoded
                reading = (tuple((parts[at], tuple(theirs)) for at, theirs in kept), tuple(unsure))
            _SLOT_READINGS.put((text_key(text, CACHED_TEXT_CHARS), said_on, reply, per_sentence), reading)


def encode_slot_readings(text: str, said_on: str | None) -> str | None:
    """slot_readings of `text` as compact JSON for the store (None: this process has made none)."""
    readings = slot_readings(text, said_on)
    return json.dumps(readings, ensure_ascii=False, separators=(",", ":")) if readings else None


def read_slots_for_store(text: str, said_on: str | None) -> str | None:
    """Ingestion's reading of a turn, for the store: the variant same_slot reads by default (not
    a reply, claims_in_passing on), encoded as encode_slot_readings; None for a text longer
    than LONG_TEXT_CHARS, whose clauses no process keeps either."""
    if len(text) > LONG_TEXT_CHARS:
        return None
    _slot_reading(text, said_on, False, True)
    return encode_slot_readings(text, said_on)


def has_slot_reading(text: str, said_on: str | None, reply: bool, per_sentence: bool) -> bool:
    return _SLOT_READINGS.get((text_key(text, CACHED_TEXT_CHARS), said_on, reply, per_sentence)) is not None


def _read_slots(text: str, said_on: str | None, reply: bool, per_sentence: bool) -> _SlotReading:
    if ADDITIVE.search(text):
        return "adds to what holds"
    if HOPE.search(text):
        return "a hope, not yet a fact"
    if NOT_YET.search(text):
        return "points to a time still ahead, or to a step not yet taken"
    # a moment frames its own sentence: "a Tern GSD, the cargo one. The Brompton got nicked in
    # December" is an episode (the theft) beside a standing state (the bike ridden now)
    anchored = {c.sentence for c in clauses(text) if ANCHORED.search(c.text)}
    if anchored and not per_sentence:
        return "anchored to a moment: an episode, not a standing state"
    if _PRESENCE.search(text) and not _RESIDENCE.search(text):
        return WHERE_THEY_ARE  # "I'm in Lisbon with the band"
    parts = clauses(text)
    if anchored and len(anchored) == len({c.sentence for c in parts}):
        return "anchored to a moment: an episode, not a standing state"
    for at, c in enumerate(parts):
        if c.question:
            continue
        if c.retracts:
            return "takes something back"
        if c.visit and c.subject in ("self", "thing", "none") and not _subordinate_stay(parts, at):
            return f"{STAY_THAT_ENDS} ({temporary(c.text) or 'a visit'})"
    kept: list[tuple[Clause, tuple[str, ...]]] = []
    unsure: list[str] = []
    framed: set[int] = set()  # sentences where a frame opened: "The plan is simple: we move to Leeds"
    for c in parts:
        if c.sentence in framed or c.sentence in anchored:
            continue
        frame = c.modal or _FRAME.search(c.text) is not None
        if frame:
            framed.add(c.sentence)
        if c.question or c.modal or c.visit or HEDGE.search(c.text):
            continue
        # not_plain, without the question, frame and hedge it has just been read for
        why = PLAN_FRAME if frame else _not_plain_unframed(c, said_on, reply)
        if why is not None:
            if c.subject in ("self", "thing") or reply:
                unsure.append(why)
            continue
        kept.append((c, tuple(m.group(1).casefold() for m in _OTHERS_THING.finditer(c.text + " "))))
    return tuple(kept), tuple(unsure)


# change_not_yet, told_as_done: the parts of a clause a relative word opens ("signed up for a course
# that starts in October": the time is ahead for the course, not for the signing up)
CLAUSE_PARTS = re.compile(r"(?i)\b(?:that|which|who|when)\b")


# said_now: a clause that marks itself as the present state ("three months fully vegan now", "it's
# tuesdays at the arts centre now"): the deictic words of the present, not a topic's
_NOW_MARK = re.compile(r"(?i)\b(?:now|nowadays|these\s+days|at\s+the\s+moment|currently)\b")


# a thing subject held by someone not the speaker ("the neighbours' dog", "Dev's pills"): not "my
# cat's", "it's", "that's"
_THEIR_THING = re.compile(r"(?i)^\W*(?:the\s+)?(?!(?:it|that|what|there|here|he|she|who|let|this)['’]s\b)"
                          r"[a-z]+(?:['’]s|s['’])\s")


def later_claims(text: str, said_on: str | None, *, done: bool, now: bool) -> list[tuple[str, str]]:
    """The clauses of a turn that may state a new value of a slot though slot_claims reads none,
    each with the reading that found it: "done" (feature told_as_done) where the speaker (or the
    speaker's thing, or no named subject) tells of something done, a past form among its words
    ("deleted my LastPass account", "just unboxed the iPhone 15", "the gmail got hacked"), not of
    a past period ("as a teenager I drank", "back in uni"); "now" (feature said_now) where a
    clause marks itself as the present ("three months fully vegan now", "it's tuesdays at the arts
    centre now"). Never a question, plan, wish, hedge, negation, step, stay, take-back or a time
    still ahead (read in the part of the clause that holds it, as change_not_yet does), nor a
    clause naming a person's or pet's thing ("my sister's car"); none at all when a clause of the
    turn has a person or pronoun subject ("Dev has", "they've sold up") or someone else's thing
    ("the neighbours' dog is a spaniel too, called Juno"): the event may be theirs."""
    parts = clauses(text)
    if any(not c.question and (c.subject in ("person", "pronoun") or (c.subject == "thing" and _THEIR_THING.match(c.text)))
           for c in parts):
        return []
    out = []
    for c in parts:
        if c.question or c.modal or c.visit or c.retracts or c.subject not in ("self", "thing", "none"):
            continue
        if (_FRAME.search(c.text) or HEDGE.search(c.text) or _NEGATION.search(c.text) or _STEP.search(c.text)
                or any(m.group(1).casefold() in PERSON_NOUNS | PET_NOUNS for m in _OTHERS_THING.finditer(c.text + " "))
                or any(not told_done(part) and ahead_of(part, said_on) for part in CLAUSE_PARTS.split(c.text))):
            continue
        if now and _NOW_MARK.search(c.text) and not _PAST_FRAME.search(c.text):
            out.append((c.text, "now"))
        elif done and told_done(c.text) and not _PAST_FRAME.search(c.text):
            out.append((c.text, "done"))  # not "Quick one about my dentist" (nothing done), "as a teenager I drank"
    return out
