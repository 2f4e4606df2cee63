"""Document templates of the synthetic world: evidence by tier, distractors, look-alikes, background."""

from __future__ import annotations

PROFESSIONS = (
    "a chef",
    "a violinist",
    "a beekeeper",
    "a schoolteacher",
    "a cyclist",
    "an architect",
    "a potter",
)
SMALL_FIRMS = (
    "a family bakery",
    "a small printing firm",
    "a bicycle repair shop",
    "a local brewery",
    "a ceramics studio",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
EVIDENCE_WORDING: dict[str, tuple[tuple[str, str], ...]] = {
    "weak": (
        (
            "Rumour mill: {topic}",
            "Unconfirmed rumours suggest that {claim}. Nobody has put their name to the claim.",
        ),
        ("Chatter over {topic}", "Anonymous posts circulating online speculate that {claim}."),
        ("Whispers about {topic}", "Unverified hearsay among insiders in {place} has it that {claim}."),
    ),
    "moderate": (
        (
            "{firm} report on {topic}",
            "A report by {firm} indicates that {claim}, citing people familiar with the matter.",
        ),
        (
            "Analysts weigh in on {topic}",
            "Analysts at {firm} expect that {claim}, according to a research note.",
        ),
        ("Survey on {topic}", "A survey by {firm} points to the view that {claim}."),
    ),
    "strong": (
        ("Leak: {topic}", "A leaked internal document seen by {outlet} confirms that {claim}."),
        ("Officials speak on {topic}", "Officials with direct knowledge confirmed to {outlet} that {claim}."),
        (
            "Draft decision on {topic}",
            "A leaked draft of the final decision, verified by {outlet}, shows that {claim}.",
        ),
    ),
}

DISTRACTOR_WORDING = (
    (
        "{person} visits {place}",
        "{person} attended a charity dinner in {place} on {weekday}; the talk was mostly about the weather.",
    ),
    (
        "{person} on childhood",
        "In a long interview, {person} talked about childhood summers in {place} and a love of old maps.",
    ),
    (
        "Still waiting on {topic}",
        "Commentators say {topic} continues to draw attention, but no new information emerged this week.",
    ),
    (
        "Explainer: {topic}",
        "An explainer from {outlet} walks through the history behind {topic} without taking a view on the result.",
    ),
    (
        "{place} library hours",
        "Officials in {place} announced longer opening hours for public libraries starting next month.",
    ),
    (
        "{company} report",
        "{company} published its annual sustainability report, which runs to {number} pages.",
    ),
)
LOOKALIKE_WORDING = (
    (
        "{lookalike} wins local contest",
        "Unconfirmed rumours suggest that {lookalike}, {profession} from {place}, will win a regional baking contest.",
    ),
    (
        "{lookalike} opens workshop",
        "{lookalike}, {profession} from {place}, opened a small workshop on {weekday}.",
    ),
)
BACKGROUND_WORDING = (
    (
        "Weather in {place}",
        "Forecasters expect {weather} in {place} on {weekday}, with temperatures near {number} degrees.",
    ),
    ("{club} beat {club2}", "{club} beat {club2} {score} in the regional league on {weekday}."),
    (
        "{place} arts season",
        "The {place} Philharmonic announced its new season, opening with a programme of local composers.",
    ),
    (
        "Roadworks in {place}",
        "Drivers in {place} should expect delays near the old harbour while roadworks continue for {number} days.",
    ),
    (
        "{place} food festival",
        "The annual food festival in {place} drew crowds for smoked fish and honey cakes on {weekday}.",
    ),
    ("Museum news in {place}", "A museum in {place} unveiled a restored {number}-year-old ferry timetable."),
    ("{club} sign new coach", "{club} named a new head coach after a difficult run of results."),
)
WEATHER = ("light rain", "sunshine", "strong winds", "fog in the morning", "snow showers", "thunderstorms")


def fill(template: str, values: dict[str, str]) -> str:
    """A template with its ``{placeholders}`` filled in."""
    return template.format(**values)


def capitalize_first(text: str) -> str:
    """``text`` with its first character upper-cased (the rest unchanged)."""
    return text[:1].upper() + text[1:]
